//go:build !linux

package freeport

// claim claims nothing where there is no abstract Unix socket namespace: ports are then
// distinct within a process only.
func claim(int) (release func(), ok bool) { return func() {}, true }

const runtimeHasAbstractSockets = false
