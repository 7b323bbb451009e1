package datadir

import (
	"os"
	"path/filepath"
)

// Test hooks for the external test package.

// LastWALSegment returns the path of the newest WAL segment of a data dir and its last index.
func LastWALSegment(dataDir string) (string, uint64, error) {
	walDir := filepath.Join(dataDir, "member", "wal")
	ws, err := readWAL(walDir, filepath.Join(dataDir, "member", "snap"), true)
	if err != nil {
		return "", 0, err
	}
	return filepath.Join(walDir, ws.Segments[len(ws.Segments)-1].Name), ws.LastIndex, nil
}

// WALRecordBounds returns the offsets where the last valid record of a segment starts and ends.
func WALRecordBounds(path string) (last, end int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	w := &walReader{src: f, name: filepath.Base(path), size: st.Size(), last: true, full: true}
	for {
		before := w.off
		if _, err := w.next(); err != nil {
			return last, before, nil
		}
		last = before
	}
}
