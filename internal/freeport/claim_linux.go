package freeport

import (
	"fmt"
	"net"
	"sync"
)

// maxHeld bounds the claims a process holds at once (each is a file descriptor): beyond it the
// oldest is released. A test binary of a full run hands out a few hundred ports.
const maxHeld = 1024

var (
	heldMu sync.Mutex
	held   []net.Listener // oldest first
)

// claim takes port p for this process among all that use this package, with a Unix socket in
// the abstract namespace named after it: only one process can hold a name, and the kernel
// frees it when the process dies, killed or not, so a claim never outlives its process and
// leaves no file. A port tried and found taken is released at once (release). One handed out
// stays claimed while the process lives (up to maxHeld claims): a member it started and
// stopped can then start again on its port, which no other process has been given meanwhile.
func claim(p int) (release func(), ok bool) {
	l, err := net.Listen("unix", fmt.Sprintf("@etcdmedic-freeport-%d", p))
	if err != nil {
		return nil, false
	}
	heldMu.Lock()
	defer heldMu.Unlock()
	held = append(held, l)
	if len(held) > maxHeld {
		held[0].Close()
		held = held[1:]
	}
	return func() {
		heldMu.Lock()
		defer heldMu.Unlock()
		for i, h := range held {
			if h == l {
				held = append(held[:i], held[i+1:]...)
				break
			}
		}
		l.Close()
	}, true
}

const runtimeHasAbstractSockets = true
