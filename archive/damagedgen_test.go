package archive

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A generation of last week whose newest segment a power cut emptied (the file:// store did
// not fsync before) must not keep the current generation from being restored, nor from being
// listed: only a damaged generation newer than the point chosen refuses the restore.
func TestADamagedOldGenerationDoesNotBlockTheCurrentOne(t *testing.T) {
	ctx := context.Background()
	st, dir := aFileStore(t)
	lastWeek := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	backup := func(gen Generation, taken time.Time, rev int64) {
		f := Full{ID: backupID(taken, rev), Taken: taken, Revision: rev, Generation: gen}
		if err := st.PutJSON(ctx, manifestKey(f.ID), f); err != nil {
			t.Fatal(err)
		}
	}
	segment := func(gen Generation, from, to int64, at time.Time) string {
		line := `{"rev":` + strconv.FormatInt(to, 10) + `,"key":"YQ==","value":"Yg==","at":"` + at.Format(time.RFC3339Nano) + `"}` + "\n"
		if _, err := st.Put(ctx, segmentKey(gen, from, to), strings.NewReader(line)); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dir, filepath.FromSlash(segmentKey(gen, from, to)))
	}
	backup("", lastWeek, 100)
	damaged := segment("", 100, 101, lastWeek.Add(time.Second))
	if err := os.WriteFile(damaged, nil, 0o600); err != nil { // emptied by a power cut
		t.Fatal(err)
	}
	current := NewGeneration()
	backup(current, lastWeek.Add(7*24*time.Hour), 500)
	segment(current, 500, 501, lastWeek.Add(7*24*time.Hour+time.Second))

	p, err := Choose(ctx, st, 0, time.Time{})
	if err != nil || p.Full.Generation != current || p.Revision != 501 {
		t.Fatalf("the latest point: %+v, %v; want revision 501 of the current generation", p, err)
	}
	entries, err := List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := ReachOf(ctx, st, entries); err != nil || r == nil || r.Revision != 501 {
		t.Fatalf("the reach: %+v, %v; want 501", r, err)
	}
	// The other way round, the damaged generation newest, the restore refuses.
	newer := NewGeneration()
	backup(newer, lastWeek.Add(8*24*time.Hour), 50)
	if err := os.WriteFile(segment(newer, 50, 51, lastWeek.Add(8*24*time.Hour+time.Second)), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := Choose(ctx, st, 0, time.Time{}); err == nil {
		t.Fatalf("chose %+v with the newest generation's history damaged", p)
	}
}
