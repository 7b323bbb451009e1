package backup

import (
	"bytes"
	"crypto/sha256"
	"testing"
)

// The trailer is found however the stream is cut into writes.
func TestTrailerHashAcrossWrites(t *testing.T) {
	db := bytes.Repeat([]byte("page"), 1024) // 4096 bytes, as a bbolt page
	sum := sha256.Sum256(db)
	stream := append(append([]byte{}, db...), sum[:]...)
	for _, chunk := range []int{1, 7, 31, 32, 33, 512, 4096, len(stream)} {
		h := &trailerHash{h: sha256.New()}
		for i := 0; i < len(stream); i += chunk {
			h.Write(stream[i:min(i+chunk, len(stream))])
		}
		if !bytes.Equal(h.h.Sum(nil), h.last) {
			t.Errorf("writes of %d bytes: the trailer does not match", chunk)
		}
	}
}
