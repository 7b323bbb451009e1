// Package backup copies and checksums what etcdmedic is about to touch, so that every
// destructive step can be proven to have lost nothing.
package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// FileSum is one file of a checksummed tree.
type FileSum struct {
	Path   string      `json:"path"` // relative to the tree's root
	Size   int64       `json:"size"`
	Mode   fs.FileMode `json:"mode"`
	SHA256 string      `json:"sha256"`
	// ModTime is the file's modification time when it was summed: with Size, it tells cheaply
	// whether the file may have changed since (see Unchanged).
	ModTime time.Time `json:"modTime,omitzero"`
	// Linked is set when the backup holds a hard link to the file rather than a copy: a file
	// its writer never changes in place (a sealed WAL segment), on the same filesystem.
	Linked bool `json:"linked,omitempty"`
}

// Checksum lists every regular file under root with its size and sha256, skipping the
// top-level entries skip names. Links are followed (see walkFollowing): a data dir given as a
// link, or a member/wal linked to another disk, is summed as the files etcd reads.
func Checksum(root string, skip map[string]bool) ([]FileSum, int64, error) {
	var out []FileSum
	var total int64
	err := walkFollowing(root, skip, func(rel string, info fs.FileInfo) error {
		if !info.Mode().IsRegular() {
			return nil
		}
		sum, err := FileSHA256(filepath.Join(root, rel))
		if err != nil {
			return err
		}
		out = append(out, FileSum{Path: rel, Size: info.Size(), Mode: info.Mode(), SHA256: sum, ModTime: info.ModTime().UTC()})
		total += info.Size()
		return nil
	}, nil)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, total, err
}

// Verify checks that every file of want is under root with the same size and checksum.
func Verify(root string, want []FileSum) error {
	got, _, err := Checksum(root, nil)
	if err != nil {
		return err
	}
	have := map[string]FileSum{}
	for _, f := range got {
		have[f.Path] = f
	}
	for _, w := range want {
		g, ok := have[w.Path]
		if !ok {
			return fmt.Errorf("%s is missing", w.Path)
		}
		if g.Size != w.Size || g.SHA256 != w.SHA256 {
			return fmt.Errorf("%s differs: %d bytes sha256 %s, manifest says %d bytes sha256 %s", w.Path, g.Size, g.SHA256, w.Size, w.SHA256)
		}
	}
	return nil
}

// Unchanged reports whether root holds exactly the files of sums, each with the size and
// modification time it had when summed (the quick check rsync makes): then the sums still
// hold without reading a byte. Sums without a modification time never qualify.
// Top-level entries skip names are not counted.
func Unchanged(root string, sums []FileSum, skip map[string]bool) bool {
	var n int
	ok := walkFollowing(root, skip, func(_ string, info fs.FileInfo) error {
		if info.Mode().IsRegular() {
			n++
		}
		return nil
	}, nil) == nil
	if !ok || n != len(sums) {
		return false
	}
	for _, f := range sums {
		info, err := os.Stat(filepath.Join(root, f.Path))
		if err != nil || f.ModTime.IsZero() || info.Size() != f.Size || !info.ModTime().Equal(f.ModTime) {
			return false
		}
	}
	return true
}

// CopyTree copies the regular files of src (as listed in files) into dst, fsyncing each. The
// copies are private (0600 in 0700 folders), whatever the source's mode bits.
func CopyTree(src, dst string, files []FileSum) error {
	for _, f := range files {
		target := filepath.Join(dst, f.Path)
		if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
			return err
		}
		if err := CopyFile(filepath.Join(src, f.Path), target, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// CopyFile copies one file and fsyncs the copy. The copy is its owner's only: mode's group and
// other bits are dropped (a copy of etcd's data holds the cluster's secrets), even over an
// existing file.
func CopyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	perm := mode.Perm()&0o700 | 0o600
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if err := out.Chmod(perm); err != nil {
		out.Close()
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// FileSHA256 is the hex sha256 of one file.
func FileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	buf := getBuffer()
	defer putBuffer(buf)
	if _, err := io.CopyBuffer(h, onlyReader{f}, buf); err != nil {
		return "", fmt.Errorf("checksum %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ReadJSON reads a JSON file.
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// WriteJSONAtomic writes through a temporary file, fsync and rename: a crash leaves the old
// file or the new one, never half of one.
func WriteJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, b)
}

// WriteFileAtomic writes b to path (0600) through a temporary file, fsync, rename and an fsync
// of the folder: a crash leaves the old file or the new one, never half of one, and the new one
// is durable when it returns.
func WriteFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs a directory, so that renames and creations in it survive a crash.
func SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// MkdirAllSynced creates dir and any missing parents, each 0700, and fsyncs every folder it
// created and the parent of each: the new path survives a power cut before anything is moved
// into it and removed from where it was.
func MkdirAllSynced(dir string) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		created = append(created, d)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// created runs deepest first: each folder, then the one that names it.
	for _, d := range created {
		if err := SyncDir(d); err != nil {
			return err
		}
		if err := SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// SyncTree fsyncs every regular file and folder under root (root included), deepest first:
// what another program wrote there (etcdutl snapshot restore) survives a power cut once it
// returns.
func SyncTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			dirs = append(dirs, p)
		case d.Type().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			err = f.Sync()
			f.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := SyncDir(dirs[i]); err != nil {
			return err
		}
	}
	return nil
}
