package backup

import "sync"

// bufferSize is the size of each read a copy, a checksum or a comparison of files makes.
const bufferSize = 1 << 20

// buffers holds the buffers of copies and checksums done, for the next ones. Each is used by
// one goroutine at a time, between getBuffer and putBuffer. A free list, not a sync.Pool:
// under the race detector they are not the Go heap's (see newBuffer), and are never freed.
var buffers struct {
	sync.Mutex
	free [][]byte
}

// getBuffer returns a buffer of bufferSize bytes, to be handed back with putBuffer.
func getBuffer() []byte {
	buffers.Lock()
	defer buffers.Unlock()
	if n := len(buffers.free); n > 0 {
		b := buffers.free[n-1]
		buffers.free = buffers.free[:n-1]
		return b
	}
	return newBuffer(bufferSize)
}

func putBuffer(b []byte) {
	buffers.Lock()
	defer buffers.Unlock()
	buffers.free = append(buffers.free, b[:bufferSize])
}
