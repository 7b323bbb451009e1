//go:build race

package backup

import "golang.org/x/sys/unix"

// newBuffer maps n bytes outside the Go heap. The race detector checks every byte of every
// read into, and write from, a buffer on the heap (the kernel's copy is reported to it as one
// access of the whole range), and skips memory it does not manage. The end-to-end tests copy
// and sum data dirs whose WAL segments are 64 MiB each: those checks were a third of their
// test binary's CPU. The buffers are a copy's or a checksum's own, one goroutine's at a time,
// so there is no race in them to find.
func newBuffer(n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return make([]byte, n)
	}
	return b
}
