package freeport

import (
	"fmt"
	"net"
	"time"
)

// claimHeld is how long a port handed out stays claimed: longer than a process takes from
// being given the port to binding it (a kube-apiserver binds its port only once it has built
// its whole server, seconds after its start on a loaded machine).
const claimHeld = 2 * time.Minute

// claim takes port p for this process among all that use this package, with a Unix socket in
// the abstract namespace named after it: only one process can hold a name, and the kernel
// frees it when the process dies, killed or not, so a claim never outlives its process and
// leaves no file. A port that is tried and found taken is released at once (release); one
// handed out is released after claimHeld.
func claim(p int) (release func(), ok bool) {
	l, err := net.Listen("unix", fmt.Sprintf("@etcdmedic-freeport-%d", p))
	if err != nil {
		return nil, false
	}
	t := time.AfterFunc(claimHeld, func() { l.Close() })
	return func() {
		t.Stop()
		l.Close()
	}, true
}

const runtimeHasAbstractSockets = true
