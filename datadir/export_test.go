package datadir

import (
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
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

// DBPages is where a bbolt file keeps one bucket, for tests that damage a page of it.
type DBPages struct {
	PageSize      int
	HighWaterMark uint64
	Freelist      uint64
	Root          uint64   // the root bucket's page
	BucketRoot    uint64   // the bucket's root page
	Children      []uint64 // the pages BucketRoot points at, if it is a branch page
}

// BucketPages reads the meta page and the root page of a top-level bucket of the bbolt file at
// path.
func BucketPages(path, bucket string) (DBPages, error) {
	f, err := os.Open(path)
	if err != nil {
		return DBPages{}, err
	}
	defer f.Close()
	size, err := statSize(f)
	if err != nil {
		return DBPages{}, err
	}
	meta, err := readBboltMeta(f, size)
	if err != nil {
		return DBPages{}, err
	}
	out := DBPages{PageSize: int(meta.PageSize), HighWaterMark: meta.HighPage, Freelist: meta.Freelist, Root: meta.Root}
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		return DBPages{}, err
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return fmt.Errorf("no bucket %q", bucket)
		}
		out.BucketRoot = uint64(b.Root())
		return nil
	})
	if err != nil {
		return DBPages{}, err
	}
	p := make([]byte, out.PageSize)
	if _, err := f.ReadAt(p, int64(out.BucketRoot)*int64(out.PageSize)); err != nil {
		return DBPages{}, err
	}
	if parsePageHeader(p).flags == pageBranch {
		out.Children = children(p)
	}
	return out, nil
}
