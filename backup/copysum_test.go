package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCopyTreeSummedCopiesWhatItSums(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "copy")
	for path, body := range map[string]string{"member/snap/db": "bbolt", "member/wal/0.wal": "wal", "skip.me/x": "no", "top": ""} {
		p := filepath.Join(src, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files, total, err := CopyTreeSummed(src, dst, map[string]bool{"skip.me": true}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || total != int64(len("bbolt")+len("wal")) {
		t.Fatalf("copied %d files, %d bytes: %+v", len(files), total, files)
	}
	want, _, err := Checksum(src, map[string]bool{"skip.me": true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if want[i] != files[i] {
			t.Errorf("sum of the copy %+v, of the source %+v", files[i], want[i])
		}
	}
	if err := Verify(dst, files); err != nil {
		t.Fatal(err)
	}
	if err := VerifyAgainstSource(dst, src, files); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "member/wal/0.wal"), []byte("WAL"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := VerifyAgainstSource(dst, src, files); err == nil {
		t.Error("a copy that differs from its source verified")
	}
	if err := os.WriteFile(filepath.Join(dst, "member/wal/0.wal"), []byte("wal+"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := VerifyAgainstSource(dst, src, files); err == nil {
		t.Error("a longer copy verified")
	}
	if _, err := os.Stat(filepath.Join(dst, "skip.me")); !os.IsNotExist(err) {
		t.Errorf("skipped folder copied: %v", err)
	}
}

func TestUnchangedIsTheQuickCheck(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "db")
	if err := os.WriteFile(p, []byte("bbolt"), 0o600); err != nil {
		t.Fatal(err)
	}
	sums, _, err := Checksum(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !Unchanged(root, sums, nil) {
		t.Fatal("an untouched tree is not unchanged")
	}
	if err := os.WriteFile(p, []byte("bbolt!"), 0o600); err != nil {
		t.Fatal(err)
	}
	if Unchanged(root, sums, nil) {
		t.Error("a file that grew is unchanged")
	}
	if err := os.WriteFile(filepath.Join(root, "new"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if Unchanged(root, sums, nil) || Unchanged(root, nil, nil) {
		t.Error("a tree with another file is unchanged")
	}
}

// Sealed WAL segments are linked, not copied: the backup keeps them when the member's folder
// is removed, and verifying checks they are still the very files summed.
func TestCopyTreeLinkingLinksOnlySealedPrivateFiles(t *testing.T) {
	root := t.TempDir()
	src, dst := filepath.Join(root, "m1"), filepath.Join(root, "backup")
	for path, mode := range map[string]os.FileMode{"member/wal/0.wal": 0o600, "member/wal/1.wal": 0o600, "member/wal/2.wal": 0o644, "member/snap/db": 0o600} {
		p := filepath.Join(src, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(path), mode); err != nil {
			t.Fatal(err)
		}
	}
	sealed := map[string]bool{"member/wal/0.wal": true, "member/wal/2.wal": true}
	files, _, err := CopyTreeLinking(src, dst, nil, 2, sealed)
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, f := range files {
		linked[f.Path] = f.Linked
	}
	if !linked["member/wal/0.wal"] || linked["member/wal/1.wal"] || linked["member/wal/2.wal"] || linked["member/snap/db"] {
		t.Fatalf("linked %v, want only the sealed segment readable by its owner alone", linked)
	}
	if err := VerifyAgainstSource(dst, src, files); err != nil {
		t.Fatal(err)
	}
	want, _, _ := Checksum(src, nil)
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	if err := Verify(dst, want); err != nil {
		t.Fatalf("the backup after its source was removed: %v", err)
	}
	// A file replaced under the same name is not the file summed.
	if err := os.MkdirAll(filepath.Join(src, "member/wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(src, f.Path)), 0o700)
		os.WriteFile(filepath.Join(src, f.Path), []byte(f.Path), 0o600)
	}
	if err := VerifyAgainstSource(dst, src, files); err == nil {
		t.Error("a linked file verified against a new file of the same name and content")
	}
}

// A file of many buffers, its last one short, is copied whole and summed as written; a
// writer that fails part way gives its error, and every buffer comes back.
func TestCopyHashingHashesEveryBufferItWrites(t *testing.T) {
	body := make([]byte, copyDepth*bufferSize*2+12345)
	for i := range body {
		body[i] = byte(i*7 + i/bufferSize)
	}
	var out bytes.Buffer
	sum, n, err := copyHashing(&out, bytes.NewReader(body))
	want := sha256.Sum256(body)
	if err != nil || n != int64(len(body)) || sum != hex.EncodeToString(want[:]) || !bytes.Equal(out.Bytes(), body) {
		t.Fatalf("copied %d of %d bytes, sum %s (want %x), same bytes %v: %v", n, len(body), sum, want, bytes.Equal(out.Bytes(), body), err)
	}
	sum, n, err = copyHashing(&failingWriter{left: 3 * bufferSize}, bytes.NewReader(body))
	if !errors.Is(err, errDiskFull) || sum != "" || n != 0 {
		t.Fatalf("a failed write: sum %q, %d bytes, %v", sum, n, err)
	}
	if sum, n, err = copyHashing(&out, bytes.NewReader(nil)); err != nil || n != 0 || sum != hex.EncodeToString(sha256.New().Sum(nil)) {
		t.Fatalf("an empty file: sum %q, %d bytes, %v", sum, n, err)
	}
}

var errDiskFull = errors.New("no space left on device")

type failingWriter struct{ left int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		return 0, errDiskFull
	}
	w.left -= len(p)
	return len(p), nil
}

// A copy made in the kernel is summed from the copy's own bytes, chunk by chunk, whatever the
// file's size; across filesystems, where the kernel refuses (EXDEV), the copy goes through a
// buffer and is summed the same.
func TestCopySummedInTheKernelSumsTheCopy(t *testing.T) {
	t.Parallel()
	dirs := []string{t.TempDir()}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if shm, err := os.MkdirTemp("/dev/shm", "etcdmedic-copy-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(shm) })
			dirs = append(dirs, shm) // another filesystem than the copies'
		}
	}
	dst := t.TempDir()
	for _, size := range []int{0, 1, copyChunk - 1, copyChunk, 3*copyChunk + 12345} {
		body := make([]byte, size)
		for i := range body {
			body[i] = byte(i*13 + i/copyChunk)
		}
		want := sha256.Sum256(body)
		for _, dir := range dirs {
			src := filepath.Join(dir, "db")
			if err := os.WriteFile(src, body, 0o600); err != nil {
				t.Fatal(err)
			}
			to := filepath.Join(dst, "db")
			sum, n, err := copySummed(src, to)
			got, rerr := os.ReadFile(to)
			if err != nil || rerr != nil || n != int64(size) || sum != hex.EncodeToString(want[:]) || !bytes.Equal(got, body) {
				t.Fatalf("%d bytes from %s: copied %d, sum %s (want %x), same bytes %v: %v %v", size, dir, n, sum, want, bytes.Equal(got, body), err, rerr)
			}
		}
	}
}

// A copy made in the kernel onto a filesystem that fills part way fails with the disk's own
// error, and says which file it was copying. (Source and copy on one small tmpfs: the kernel
// copies there, where a copy across filesystems would go through a buffer.)
func TestCopySummedInTheKernelOntoAFullDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=6m"); err != nil {
		t.Skipf("a small filesystem is needed (tmpfs mount as root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	src := filepath.Join(dir, "db")
	if err := os.WriteFile(src, bytes.Repeat([]byte("etcd"), 1<<20), 0o600); err != nil { // 4 MiB of 6
		t.Fatal(err)
	}
	sum, n, err := copySummed(src, filepath.Join(dir, "copy"))
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), src) || sum != "" || n != 0 {
		t.Fatalf("a copy onto a full disk: sum %q, %d bytes, %v", sum, n, err)
	}
}
