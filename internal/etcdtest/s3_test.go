package etcdtest

import (
	"os"
	"testing"
)

// SeaweedFS makes its Unix sockets in /tmp whatever TMPDIR says; a stopped server leaves none
// behind (the runs before this test left one set per S3 test in /tmp).
func TestS3LeavesNoSocketsInTmp(t *testing.T) {
	t.Parallel()
	s := StartS3(t)
	made := 0
	for _, sock := range s.sockets {
		if _, err := os.Stat(sock); err == nil {
			made++
		}
	}
	if made == 0 {
		t.Fatalf("the running server made none of %v: the names no longer match SeaweedFS's", s.sockets)
	}
	s.Stop()
	for _, sock := range s.sockets {
		if _, err := os.Stat(sock); err == nil {
			t.Errorf("%s left behind by a stopped server", sock)
		}
	}
}
