package archive

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/store"
)

// A `backup now` killed mid-upload into a file:// store leaves the upload's temporary file
// beside the objects, as large as what it had written. Prune removes those a day old, and
// leaves an upload that may still run, every object, and anything else named .tmp, in its
// folders or outside them.
func TestPruneRemovesUploadsKilledLongAgo(t *testing.T) {
	ctx := context.Background()
	st, dir := aFileStore(t)
	if _, err := st.Put(ctx, segmentKey("", 100, 200), strings.NewReader("{}\n")); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	leftover := func(key string, created time.Time) string {
		// The name gocloud's fileblob gives an object while it is written.
		name := key + "." + strconv.FormatInt(created.UnixNano(), 16) + ".tmp"
		path := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(path), 0o700)
		if err := os.WriteFile(path, []byte("half a snapshot"), 0o600); err != nil {
			t.Fatal(err)
		}
		return name
	}
	killedLastWeek := leftover("full/20261124T000000.000Z-r000000000900.db", now.Add(-7*24*time.Hour))
	killedYesterday := leftover(segmentKey("", 200, 300), now.Add(-25*time.Hour))
	stillUploading := leftover("full/20261203T000000.000Z-r000000001000.db", now.Add(-time.Hour))
	notAnUpload := "notes.tmp"
	os.WriteFile(filepath.Join(dir, notAnUpload), []byte("the operator's"), 0o600)
	// Named like an upload, but outside the folders etcdmedic writes: another tool's.
	others := leftover("exports/dump", now.Add(-48*time.Hour))

	got, err := UploadLeftovers(ctx, st, now)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{killedLastWeek, killedYesterday}; !slices.Equal(got, want) {
		t.Fatalf("leftovers %q: want %q", got, want)
	}
	if err := Prune(ctx, st, PrunePlan{UploadLeftovers: got}); err != nil {
		t.Fatal(err)
	}
	keys, err := st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{segmentKey("", 100, 200), stillUploading, notAnUpload, others}; !sameKeys(keys, want) {
		t.Fatalf("after prune the store holds %q: want %q", keys, want)
	}
}

func sameKeys(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// A full backup's data whose manifest never made it (the run killed between the two uploads, a
// prune stopped between them) is a whole snapshot nobody lists. Prune removes it once a day
// old by the time its ID names, and leaves a newer one (a backup whose manifest is on its way),
// every backup with its manifest, and anything not named as etcdmedic names its backups.
func TestPruneRemovesBackupDataWithoutAManifest(t *testing.T) {
	ctx := context.Background()
	st, _ := aFileStore(t)
	now := time.Now()
	put := func(key string) {
		if _, err := st.Put(ctx, key, strings.NewReader("snapshot")); err != nil {
			t.Fatal(err)
		}
	}
	whole := backupID(now.Add(-72*time.Hour), 100)
	put(fullPrefix + whole + ".db")
	if err := st.PutJSON(ctx, manifestKey(whole), Full{ID: whole}); err != nil {
		t.Fatal(err)
	}
	orphan := fullPrefix + backupID(now.Add(-48*time.Hour), 200) + ".db"
	put(orphan)
	onItsWay := fullPrefix + backupID(now.Add(-time.Hour), 300) + ".db"
	put(onItsWay)
	foreign := fullPrefix + "nightly-2026-11-01.db"
	put(foreign)
	got, err := UploadLeftovers(ctx, st, now)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{orphan}) {
		t.Fatalf("leftovers %v, want only %s", got, orphan)
	}
}

// aFileStore opens a new file:// store in a temp folder, closed when the test ends, and returns
// it with the folder.
func aFileStore(t *testing.T) (*store.Store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), "file://"+dir, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, dir
}
