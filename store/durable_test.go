package store_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/etcdmedic/etcdmedic/internal/crashfs"
	"github.com/etcdmedic/etcdmedic/store"
)

// mountCrashFS mounts a filesystem that loses, on a power cut, whatever was not synced; the
// test is skipped where FUSE cannot be used.
func mountCrashFS(t *testing.T, backing, mnt string) *crashfs.FS {
	t.Helper()
	f, err := crashfs.Mount(backing, mnt)
	if errors.Is(err, crashfs.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// What Put reported stored in a file:// store is there after a power cut: a full backup's
// data, its manifest, and a segment of history in a folder made for it, whole.
func TestWhatIsStoredSurvivesAPowerCut(t *testing.T) {
	backing, mnt := t.TempDir(), filepath.Join(t.TempDir(), "mnt")
	disk := mountCrashFS(t, backing, mnt)
	url := "file://" + filepath.Join(mnt, "backups", "etcd")
	st, err := store.Open(context.Background(), url, store.Options{Create: true})
	if err != nil {
		disk.Unmount()
		t.Fatal(err)
	}
	objects := map[string][]byte{
		"full/20261203T100000.000Z-r000000000100.db":                         bytes.Repeat([]byte("etcd snapshot page "), 100_000),
		"full/20261203T100000.000Z-r000000000100.json":                       []byte(`{"id":"20261203T100000.000Z-r000000000100"}`),
		"history/20261203T100000Z-3fa9c1d2/000000000100-000000000200.events": []byte("{\"rev\":101}\n"),
	}
	for key, plain := range objects {
		if _, err := st.Put(context.Background(), key, bytes.NewReader(plain)); err != nil {
			disk.Unmount()
			t.Fatal(err)
		}
	}
	st.Close()
	report, err := disk.Cut(crashfs.CutOptions{})
	if err != nil {
		t.Fatalf("cut: %v", err)
	}
	t.Logf("the power cut dropped: %s", report)
	disk = mountCrashFS(t, backing, mnt)
	defer disk.Unmount()
	st, err = store.Open(context.Background(), url, store.Options{})
	if err != nil {
		t.Fatalf("after the power cut: %v", err)
	}
	defer st.Close()
	for key, plain := range objects {
		r, err := st.Get(context.Background(), key)
		if err != nil {
			t.Errorf("after the power cut, %s: %v", key, err)
			continue
		}
		var got bytes.Buffer
		_, err = got.ReadFrom(r)
		r.Close()
		if err != nil || !bytes.Equal(got.Bytes(), plain) {
			t.Errorf("after the power cut, %s reads %d bytes (%v), stored %d", key, got.Len(), err, len(plain))
		}
	}
}
