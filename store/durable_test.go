package store_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/etcdmedic/etcdmedic/internal/crashfs"
	"github.com/etcdmedic/etcdmedic/store"
)

// What Put reported stored in a file:// store is there after a power cut: a full backup's
// data, its manifest, and a segment of history in a folder made for it, whole.
func TestWhatIsStoredSurvivesAPowerCut(t *testing.T) {
	objects := map[string][]byte{
		"full/20261203T100000.000Z-r000000000100.db":                         bytes.Repeat([]byte("etcd snapshot page "), 100_000),
		"full/20261203T100000.000Z-r000000000100.json":                       []byte(`{"id":"20261203T100000.000Z-r000000000100"}`),
		"history/20261203T100000Z-3fa9c1d2/000000000100-000000000200.events": []byte("{\"rev\":101}\n"),
	}
	url := func(mnt string) string { return "file://" + filepath.Join(mnt, "backups", "etcd") }
	mnt := crashfs.AfterPowerCut(t, func(mnt string) error {
		st, err := store.Open(context.Background(), url(mnt), store.Options{Create: true})
		if err != nil {
			return err
		}
		defer st.Close()
		for key, plain := range objects {
			if _, err := st.Put(context.Background(), key, bytes.NewReader(plain)); err != nil {
				return err
			}
		}
		return nil
	})
	st, err := store.Open(context.Background(), url(mnt), store.Options{})
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
