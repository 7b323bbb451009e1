package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/etcdmedic/etcdmedic/store"
)

func openFile(t *testing.T, opts store.Options) (*store.Store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), "file://"+dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, dir
}

func readAll(t *testing.T, st *store.Store, key string) []byte {
	t.Helper()
	r, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// What goes in comes out, compressed in the store, with the sha256 of what went in.
func TestAnObjectComesBackAsItWent(t *testing.T) {
	st, dir := openFile(t, store.Options{})
	plain := bytes.Repeat([]byte("etcd snapshot page "), 50_000)
	w, err := st.Put(context.Background(), "full/a.db", bytes.NewReader(plain))
	if err != nil {
		t.Fatal(err)
	}
	if w.Bytes != int64(len(plain)) || w.StoredBytes >= w.Bytes/10 || len(w.SHA256) != 64 {
		t.Errorf("written %+v: want %d plain bytes, stored compressed", w, len(plain))
	}
	if got := readAll(t, st, "full/a.db"); !bytes.Equal(got, plain) {
		t.Fatalf("read back %d bytes, want %d", len(got), len(plain))
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "full", "a.db"))
	if int64(len(raw)) != w.StoredBytes || len(raw) >= len(plain)/10 {
		t.Errorf("the stored object is %d bytes for %d plain (recorded %d): not compressed", len(raw), len(plain), w.StoredBytes)
	}
	if _, err := st.Get(context.Background(), "full/none.db"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a missing key: %v", err)
	}
}

// Encrypted to an age recipient: unreadable in the store, read back with the identity, refused
// without it.
func TestEncryptedObjectsNeedTheIdentity(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	idFile := filepath.Join(t.TempDir(), "key.txt")
	os.WriteFile(idFile, []byte(id.String()+"\n"), 0o600)
	dir := t.TempDir()
	st, err := store.Open(context.Background(), "file://"+dir, store.Options{Recipients: []string{id.Recipient().String()}, IdentityFile: idFile})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	secret := []byte("/registry/secrets/kube-system/bootstrap-token-abcdef")
	if w, err := st.Put(context.Background(), "full/s.db", bytes.NewReader(secret)); err != nil || !w.Encrypted {
		t.Fatalf("put: %+v %v", w, err)
	}
	if got := readAll(t, st, "full/s.db"); !bytes.Equal(got, secret) {
		t.Fatalf("decrypted %q", got)
	}
	blind, err := store.Open(context.Background(), "file://"+dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer blind.Close()
	if _, err := blind.Get(context.Background(), "full/s.db"); err == nil || !strings.Contains(err.Error(), "--age-identity") {
		t.Errorf("read without the identity: %v", err)
	}
}

// An upload that fails half way leaves nothing under its key.
func TestAHalfUploadIsNeverAnObject(t *testing.T) {
	st, _ := openFile(t, store.Options{})
	broken := io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("x"), 1<<20)), errReader{})
	if _, err := st.Put(context.Background(), "full/half.db", broken); err == nil {
		t.Fatal("a failing reader was stored")
	}
	keys, err := st.List(context.Background(), "full/")
	if err != nil || len(keys) != 0 {
		t.Fatalf("after a failed upload the store lists %v (%v)", keys, err)
	}
}

// The same for PutRaw (the benchmark's raw copy of a file): a file that cannot be read whole
// (here a folder, whose read fails at once) leaves nothing under its key, where it left an
// empty object.
func TestAHalfRawUploadIsNeverAnObject(t *testing.T) {
	st, _ := openFile(t, store.Options{})
	if _, err := st.PutRaw(context.Background(), "full/raw.db", t.TempDir()); err == nil {
		t.Fatal("a file that does not read was stored")
	}
	keys, err := st.List(context.Background(), "full/")
	if err != nil || len(keys) != 0 {
		t.Fatalf("after a failed raw upload the store lists %v (%v)", keys, err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

// Bad store URLs are refused with what to give instead.
func TestStoreURLsRefused(t *testing.T) {
	for _, u := range []string{"/var/backups/etcd", "file://", "nosuch://bucket"} {
		if _, err := store.Open(context.Background(), u, store.Options{}); err == nil {
			t.Errorf("Open(%q) succeeded", u)
		}
	}
	missing := filepath.Join(t.TempDir(), "none")
	if _, err := store.Open(context.Background(), "file://"+missing, store.Options{}); err == nil {
		t.Error("a missing file:// store was opened to read")
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("opening a missing store to read created its folder")
	}
	if _, err := store.Open(context.Background(), "file://"+t.TempDir(), store.Options{Recipients: []string{"age1notakey"}}); err == nil {
		t.Error("a bad age recipient was taken")
	}
}

// backup ls while backup run uploads: a file:// store lists an upload's temporary file, which
// the upload renames a moment later. The listing must not fail for it (CI-52 saw it do so).
func TestListingWhileUploadsComeAndGo(t *testing.T) {
	st, _ := openFile(t, store.Options{})
	ctx, stop := context.WithTimeout(context.Background(), 3*time.Second)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			st.Put(ctx, fmt.Sprintf("history/%012d.events", i), bytes.NewReader(bytes.Repeat([]byte("x"), 4096)))
			time.Sleep(2 * time.Millisecond) // 500 uploads a second: far more than backup run makes
		}
	}()
	lists := 0
	for ; ctx.Err() == nil; lists++ {
		if _, err := st.List(ctx, "history/"); err != nil && ctx.Err() == nil {
			t.Fatalf("listing %d while uploads run: %v", lists, err)
		}
	}
	<-done
	t.Logf("%d listings beside the uploads", lists)
}

// An object emptied or replaced on disk (a power cut that kept a renamed file's name and lost
// its bytes, a truncation) is damaged: it never reads as an object holding nothing.
func TestAnEmptiedObjectIsDamagedNotEmpty(t *testing.T) {
	st, dir := openFile(t, store.Options{})
	if _, err := st.Put(context.Background(), "history/a.events", strings.NewReader("")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, st, "history/a.events"); len(got) != 0 {
		t.Fatalf("an object stored empty reads back as %q", got)
	}
	for name, bytes := range map[string][]byte{"emptied": nil, "not zstd": []byte("{\"rev\":101}\n")} {
		if err := os.WriteFile(filepath.Join(dir, "history", "a.events"), bytes, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := st.Get(context.Background(), "history/a.events")
		if err == nil {
			b, rerr := io.ReadAll(r)
			r.Close()
			t.Fatalf("%s: reads as %d bytes (%v), want ErrCorrupt", name, len(b), rerr)
		}
		if !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
