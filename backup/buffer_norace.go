//go:build !race

package backup

func newBuffer(n int) []byte { return make([]byte, n) }
