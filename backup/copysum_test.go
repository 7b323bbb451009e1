package backup

import (
	"os"
	"path/filepath"
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
