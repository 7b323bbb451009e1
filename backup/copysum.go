package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// CopyTreeSummed copies every regular file under src into dst (skipping the top-level entries
// skip names), reading each file once: the checksum is of the very bytes written. Each copy is
// fsynced, and so is every folder created. src must not change meanwhile (a stopped member).
func CopyTreeSummed(src, dst string, skip map[string]bool) ([]FileSum, int64, error) {
	var out []FileSum
	var total int64
	buf := make([]byte, 1<<20)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if skip[rel] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		sum, n, err := copySummed(p, filepath.Join(dst, rel), info.Mode().Perm(), buf)
		if err != nil {
			return err
		}
		out = append(out, FileSum{Path: rel, Size: n, Mode: info.Mode(), SHA256: sum})
		total += n
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	// The folders' entries must survive a crash too.
	dirs := map[string]bool{dst: true}
	for _, f := range out {
		dirs[filepath.Dir(filepath.Join(dst, f.Path))] = true
	}
	for d := range dirs {
		if err := SyncDir(d); err != nil {
			return nil, 0, err
		}
	}
	return out, total, nil
}

func copySummed(src, dst string, mode fs.FileMode, buf []byte) (string, int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode|0o600)
	if err != nil {
		return "", 0, err
	}
	h := sha256.New()
	n, err := io.CopyBuffer(io.MultiWriter(out, h), onlyReader{in}, buf)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, fmt.Errorf("copy %s: %w", src, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// onlyReader hides the file's WriterTo/ReaderFrom so that io.CopyBuffer reads through buf.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }
