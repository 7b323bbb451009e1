package datadir

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSealedWALSegmentsAreAllButTheNewest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wal := filepath.Join(dir, "member", "wal")
	if err := os.MkdirAll(wal, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"0000000000000001-0000000000000010.wal", "0000000000000000-0000000000000000.wal", "0000000000000002-0000000000000020.wal", "0.tmp"} {
		if err := os.WriteFile(filepath.Join(wal, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := SealedWALSegments(dir)
	if len(got) != 2 || !got["member/wal/0000000000000000-0000000000000000.wal"] || !got["member/wal/0000000000000001-0000000000000010.wal"] {
		t.Fatalf("sealed %v, want the two older segments (not the newest, not the preallocated .tmp)", got)
	}
	if got := SealedWALSegments(t.TempDir()); len(got) != 0 {
		t.Fatalf("no WAL: %v", got)
	}
}
