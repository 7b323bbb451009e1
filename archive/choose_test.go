package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/store"
)

// aStore is a file:// store holding full backups (by ID, revision, time and verification) and
// history segments whose events are one put per revision, captured a second apart from at.
type aStore struct {
	t   *testing.T
	st  *store.Store
	dir string
	at  time.Time
}

func newStore(t *testing.T) *aStore {
	dir := t.TempDir()
	st, err := store.Open(t.Context(), "file://"+dir, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &aStore{t: t, st: st, dir: dir, at: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)}
}

func (s *aStore) timeOf(rev int64) time.Time { return s.at.Add(time.Duration(rev) * time.Second) }

func (s *aStore) full(rev int64, state string) {
	f := Full{ID: fmt.Sprintf("%s-r%012d", s.timeOf(rev).Format("20060102T150405.000Z"), rev), Taken: s.timeOf(rev), Revision: rev}
	if err := s.st.PutJSON(context.Background(), manifestKey(f.ID), f); err != nil {
		s.t.Fatal(err)
	}
	if state != "unverified" {
		if err := s.st.PutJSON(context.Background(), verifyPrefix+f.ID+".json", Verification{ID: f.ID, Result: state}); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s *aStore) history(from, to int64) {
	var buf bytes.Buffer
	for rev := from + 1; rev <= to; rev++ {
		json.NewEncoder(&buf).Encode(Event{Revision: rev, Key: []byte("k"), Value: []byte("v"), At: s.timeOf(rev)})
	}
	if _, err := s.st.Put(context.Background(), segmentKey("", from, to), &buf); err != nil {
		s.t.Fatal(err)
	}
}

// newerBackupFailed: a verified backup at 100 with history to 200, and a newer one at 250 that
// failed verification, with history from it to 400: from the older, revisions 201 to 400 are
// out of reach.
func newerBackupFailed(s *aStore) {
	s.full(100, "verified")
	s.history(100, 200)
	s.full(250, "failed")
	s.history(250, 400)
}

// A restore "as late as the store reaches" (or to a time) must not quietly stop short of
// changes the store holds: the operator is told which revisions would be lost, and chooses
// that with --to-revision.
func TestChooseNeverStopsShortOfWhatTheStoreHolds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fill       func(s *aStore)
		toRevision int64
		toTime     int64 // as a revision's capture time (0: not by time)
		want       int64 // the revision chosen; 0: refused
		refusal    string
	}{
		{"whole history: the newest revision", func(s *aStore) {
			s.full(100, "verified")
			s.history(100, 200)
			s.full(250, "verified")
			s.history(200, 400)
		}, 0, 0, 400, ""},
		{"the newest backup failed verification and the history after the older one stops before it", newerBackupFailed, 0, 0, 0, "revisions 201 to 400 cannot be restored"},
		{"the same, by a time after the gap", newerBackupFailed, 0, 300, 0, "cannot be restored"},
		{"the same, by a time before the gap", newerBackupFailed, 0, 150, 200, ""},
		{"the same, accepted with --to-revision", newerBackupFailed, 200, 0, 200, ""},
		{"a gap in the history", func(s *aStore) {
			s.full(100, "unverified")
			s.history(100, 200)
			s.history(210, 300)
		}, 0, 0, 0, "history segment history/000000000210-000000000300.events holds revisions 211 to 300"},
		{"a killed upload's temp file beside the history is not history", func(s *aStore) {
			s.full(100, "unverified")
			s.history(100, 103)
			leftover := filepath.Join(s.dir, segmentKey("", 103, 110)+".6f1c2a.tmp")
			if err := os.WriteFile(leftover, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, 0, 0, 103, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			tc.fill(s)
			var toTime time.Time
			if tc.toTime > 0 {
				toTime = s.timeOf(tc.toTime)
			}
			p, err := Choose(t.Context(), s.st, tc.toRevision, toTime)
			switch {
			case tc.want == 0 && err == nil:
				t.Fatalf("chose revision %d (backup %s), want a refusal", p.Revision, p.Full.ID)
			case tc.want == 0 && !strings.Contains(err.Error(), tc.refusal):
				t.Fatalf("refused with %q, want it to say %q", err, tc.refusal)
			case tc.want == 0:
				t.Logf("refused: %v", err)
			case err != nil:
				t.Fatalf("refused: %v, want revision %d", err, tc.want)
			case p.Revision != tc.want:
				t.Fatalf("chose revision %d, want %d", p.Revision, tc.want)
			}
		})
	}
}

// A damaged manifest (or one encrypted to a key no longer given) is listed as unreadable, with
// why: it hides no other backup from a restore, and prune keeps it without counting it.
func TestAnUnreadableManifestHidesNoOtherBackup(t *testing.T) {
	s := newStore(t)
	s.full(100, "verified")
	s.history(100, 200)
	s.full(150, "unverified")
	damaged := filepath.Join(s.dir, "full", "20261203T100100.000Z-r000000000050.json")
	if err := os.WriteFile(damaged, []byte("not a manifest"), 0o600); err != nil {
		t.Fatal(err)
	}
	entries, err := List(t.Context(), s.st)
	if err != nil || len(entries) != 3 {
		t.Fatalf("listed %d backups (%v), want 3", len(entries), err)
	}
	if e := entries[0]; e.State() != "unreadable" || e.Usable() || e.Unreadable == "" {
		t.Fatalf("the damaged manifest is listed as %+v", e)
	}
	p, err := Choose(t.Context(), s.st, 0, time.Time{})
	if err != nil || p.Revision != 200 || p.Full.Revision != 150 {
		t.Fatalf("restore chose %+v (%v), want backup r150 to revision 200", p, err)
	}
	plan := PlanPrune(entries, nil, nil, Retention{Last: 1})
	var kept []string
	for _, e := range plan.Keep {
		kept = append(kept, e.ID)
	}
	if len(plan.Keep) != 3 || len(plan.Remove) != 0 {
		t.Fatalf("prune keeps %v and removes %d (%v), want every backup kept: the newest, the newest verified, the unreadable", kept, len(plan.Remove), plan.Why)
	}
}

// Restored to a time, the replay stops at the first change captured after it, even when the
// clock then stepped back and a later change carries an earlier time: the point is a prefix of
// the history, never one with a hole.
func TestARestoreToATimeStopsAtTheFirstChangeAfterIt(t *testing.T) {
	s := newStore(t)
	s.full(100, "verified")
	var buf bytes.Buffer
	times := map[int64]int64{101: 101, 102: 102, 103: 110, 104: 104, 105: 111} // 104: the clock stepped back
	for rev := int64(101); rev <= 105; rev++ {
		json.NewEncoder(&buf).Encode(Event{Revision: rev, Key: []byte("k"), Value: []byte("v"), At: s.timeOf(times[rev])})
	}
	if _, err := s.st.Put(t.Context(), segmentKey("", 100, 105), &buf); err != nil {
		t.Fatal(err)
	}
	p, err := Choose(t.Context(), s.st, 0, s.timeOf(105))
	if err != nil {
		t.Fatal(err)
	}
	events, err := pointEvents(t.Context(), s.st, p)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(events); n != 2 || events[n-1].Revision != 102 {
		t.Fatalf("replays %d changes up to %+v, want revisions 101 and 102", n, events)
	}
}
