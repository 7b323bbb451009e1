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
	if _, err := s.st.Put(context.Background(), segmentKey(from, to), &buf); err != nil {
		s.t.Fatal(err)
	}
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
		{"the newest backup failed verification and the history after the older one stops before it", func(s *aStore) {
			s.full(100, "verified")
			s.history(100, 200)
			s.full(250, "failed")
			s.history(250, 400)
		}, 0, 0, 0, "revisions 201 to 400 cannot be restored"},
		{"the same, by a time after the gap", func(s *aStore) {
			s.full(100, "verified")
			s.history(100, 200)
			s.full(250, "failed")
			s.history(250, 400)
		}, 0, 300, 0, "cannot be restored"},
		{"the same, by a time before the gap", func(s *aStore) {
			s.full(100, "verified")
			s.history(100, 200)
			s.full(250, "failed")
			s.history(250, 400)
		}, 0, 150, 200, ""},
		{"the same, accepted with --to-revision", func(s *aStore) {
			s.full(100, "verified")
			s.history(100, 200)
			s.full(250, "failed")
			s.history(250, 400)
		}, 200, 0, 200, ""},
		{"a gap in the history", func(s *aStore) {
			s.full(100, "unverified")
			s.history(100, 200)
			s.history(210, 300)
		}, 0, 0, 0, "history segment history/000000000210-000000000300.events holds revisions 211 to 300"},
		{"a killed upload's temp file beside the history is not history", func(s *aStore) {
			s.full(100, "unverified")
			s.history(100, 103)
			leftover := filepath.Join(s.dir, segmentKey(103, 110)+".6f1c2a.tmp")
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
