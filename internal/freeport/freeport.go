// Package freeport chooses free TCP ports on 127.0.0.1 for the processes etcdmedic starts (a
// sandbox's members and apiservers, a scratch member) and the tests start, outside the
// kernel's ephemeral range: outgoing connections take their local ports from that range, so a
// port chosen inside it (as a listen on port 0 chooses) can be taken by any connection between
// the choice and the bind ("bind: address already in use", seen under a busy test run).
// Outside it only another listener can take it. Within a process no port is handed out twice,
// and on Linux, across processes (the test binaries of a run, the etcdmedic binaries they
// start), a port is claimed before it is tried and stays claimed while the process that handed
// it out lives (its 1,024 newest ports; see claim): two of them do not give out the same port,
// nor try one that a process of the other is about to bind, or to bind again after a restart.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
)

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Ports returns n distinct ports on 127.0.0.1 that were free when chosen.
func Ports(n int) ([]int, error) {
	lo, hi := band()
	mu.Lock()
	defer mu.Unlock()
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n+1000 {
			return nil, fmt.Errorf("no free port on 127.0.0.1 between %d and %d", lo, hi)
		}
		p := lo + rand.IntN(hi-lo+1)
		if given[p] {
			continue
		}
		keep, release, ok := claim(p)
		if !ok {
			continue // another process chose it, or is trying it
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			release()
			continue
		}
		l.Close()
		keep()
		given[p] = true
		out = append(out, p)
	}
	return out, nil
}

// band is the range ports are chosen from: below the ephemeral range when there is room (from
// 10000), else above it.
func band() (int, int) {
	lo, hi := 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscanf(string(b), "%d %d", &lo, &hi)
	}
	if lo-1 >= 11000 {
		return 10000, lo - 1
	}
	if hi < 64535 {
		return hi + 1, 65535
	}
	return 1024, 65535 // the whole range is ephemeral: nothing better to do
}
