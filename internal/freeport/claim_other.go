//go:build !linux

package freeport

// claim claims nothing where there is no abstract Unix socket namespace: ports are then
// distinct within a process only.
func claim(int) (keep, release func(), ok bool) { return func() {}, func() {}, true }

const runtimeHasAbstractSockets = false
