package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// timeline is one history of the cluster as it is backed up: its generation (empty: as stored
// before generations), the value every put writes, and when its revisions were captured.
type timeline struct {
	s     *aStore
	gen   Generation
	value string
	start time.Time // when revision 0 would have been captured
}

func (tl timeline) timeOf(rev int64) time.Time { return tl.start.Add(time.Duration(rev) * time.Second) }

func (tl timeline) full(rev int64) {
	f := Full{ID: fmt.Sprintf("%s-r%012d", tl.timeOf(rev).Format("20060102T150405.000Z"), rev), Taken: tl.timeOf(rev), Revision: rev, Generation: tl.gen}
	if err := tl.s.st.PutJSON(context.Background(), manifestKey(f.ID), f); err != nil {
		tl.s.t.Fatal(err)
	}
}

func (tl timeline) history(from, to int64) {
	var buf bytes.Buffer
	for rev := from + 1; rev <= to; rev++ {
		json.NewEncoder(&buf).Encode(Event{Revision: rev, Key: []byte("k"), Value: []byte(tl.value), At: tl.timeOf(rev)})
	}
	if _, err := tl.s.st.Put(context.Background(), segmentKey(tl.gen, from, to), &buf); err != nil {
		tl.s.t.Fatal(err)
	}
}

// restoredAndWentOn: backed up from revision 100 to 300; then the cluster was restored to
// revision 150 and went on (an hour later) with other changes under the same revision
// numbers, backed up into the same store from revision 160 to 170.
func restoredAndWentOn(s *aStore, oldGen, newGen Generation) {
	old := timeline{s: s, gen: oldGen, value: "old", start: s.at}
	old.full(100)
	old.history(100, 200)
	old.history(200, 300)
	now := timeline{s: s, gen: newGen, value: "new", start: s.at.Add(time.Hour)}
	now.full(160)
	now.history(160, 170)
}

// replayed returns the point's revision and the values its replay writes, in order.
func replayed(t *testing.T, s *aStore, p *Point) (int64, string, error) {
	events, err := pointEvents(t.Context(), s.st, p)
	if err != nil {
		return 0, "", err
	}
	values := map[string]bool{}
	for _, e := range events {
		values[string(e.Value)] = true
	}
	var got []string
	for v := range values {
		got = append(got, v)
	}
	return p.Revision, strings.Join(got, ","), nil
}

// A cluster restored to an earlier point goes on with revisions of the same numbers: its
// backups form a new generation, and a restore replays onto a backup only its own
// generation's history, never the old history's changes at those numbers.
func TestARestoredClusterThatWentOnIsNeverSplicedOntoTheOldHistory(t *testing.T) {
	s := newStore(t)
	restoredAndWentOn(s, NewGeneration(), NewGeneration())
	for _, tc := range []struct {
		name       string
		toRevision int64
		wantFull   int64
		wantRev    int64
		wantValues string
	}{
		{"the latest point: the history the cluster went on with", 0, 160, 170, "new"},
		{"a revision both histories hold: the newer one", 165, 160, 165, "new"},
		{"a revision only the old history reaches", 250, 100, 250, "old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Choose(t.Context(), s.st, tc.toRevision, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			rev, values, err := replayed(t, s, p)
			if err != nil {
				t.Fatal(err)
			}
			if p.Full.Revision != tc.wantFull || rev != tc.wantRev || values != tc.wantValues {
				t.Fatalf("restores backup r%d to revision %d replaying %q changes, want backup r%d to %d with only %q ones", p.Full.Revision, rev, values, tc.wantFull, tc.wantRev, tc.wantValues)
			}
		})
	}
	reach, err := ReachOf(t.Context(), s.st, mustList(t, s))
	if err != nil || reach.Revision != 170 {
		t.Fatalf("backup ls says a restore reaches %+v (%v), want revision 170", reach, err)
	}
}

// The same in a store written before generations: where two segments hold the same revision
// with different changes, the restore fails and says so; it never replays one history onto a
// backup of the other.
func TestTwoHistoriesStoredBeforeGenerationsFailTheRestore(t *testing.T) {
	s := newStore(t)
	restoredAndWentOn(s, "", "")
	p, err := Choose(t.Context(), s.st, 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	rev, values, err := replayed(t, s, p)
	if err == nil {
		t.Fatalf("restores backup r%d to revision %d replaying %q changes, want a refusal", p.Full.Revision, rev, values)
	}
	if !strings.Contains(err.Error(), "two different histories") {
		t.Fatalf("refused with %q, want it to name two different histories", err)
	}
	t.Logf("refused: %v", err)
	// Overlapping segments of one history (two backup runs into one store) agree: restored.
	s = newStore(t)
	one := timeline{s: s, value: "v", start: s.at}
	one.full(100)
	one.history(100, 200)
	one.history(150, 260)
	p, err = Choose(t.Context(), s.st, 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if rev, values, err := replayed(t, s, p); err != nil || rev != 260 || values != "v" {
		t.Fatalf("two captures of one history restore to revision %d with %q (%v), want 260", rev, values, err)
	}
}

func mustList(t *testing.T, s *aStore) []Entry {
	entries, err := List(t.Context(), s.st)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}
