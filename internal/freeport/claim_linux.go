package freeport

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
)

// maxHeld bounds the claims a process keeps at once (each is a file descriptor): beyond it the
// oldest is released. A test binary of a full run hands out a few hundred ports.
const maxHeld = 1024

var (
	heldMu sync.Mutex
	held   []net.Listener // oldest first
)

// claim takes port p for this process among all that use this package, with a Unix socket in
// the abstract namespace named after it: only one process can hold a name, and the kernel
// frees it when the process dies, killed or not, so a claim never outlives its process and
// leaves no file. keep holds the claim of a port handed out while the process lives (up to
// maxHeld claims): a member it started and stopped can then start again on its port, which no
// other process has been given meanwhile. release lets go of a port tried and found taken.
// ok is false only when another process holds the claim; where no Unix socket may be made (a
// sandboxed service), the port is handed out unclaimed, as on other systems.
func claim(p int) (keep, release func(), ok bool) {
	l, err := net.Listen("unix", fmt.Sprintf("@etcdmedic-freeport-%d", p))
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, nil, false
	}
	if err != nil {
		return func() {}, func() {}, true
	}
	keep = func() {
		heldMu.Lock()
		defer heldMu.Unlock()
		held = append(held, l)
		if len(held) > maxHeld {
			held[0].Close()
			held = held[1:]
		}
	}
	return keep, func() { l.Close() }, true
}

const runtimeHasAbstractSockets = true
