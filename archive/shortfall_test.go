package archive

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/store"
)

// A restore reaches exactly the point chosen or fails: a segment emptied on disk (a power cut
// that kept its name and lost its bytes) or cut short (its last changes lost) never lets the
// restore stop quietly at an earlier revision, to a revision or to the latest point.
func TestARestoreNeverStopsShortOfThePointChosen(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(s *aStore, path string)
		refusal string
		corrupt bool
	}{
		{"the segment emptied (0 bytes)", func(s *aStore, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "empty", true},
		{"the segment cut short: its changes past revision 150 lost", func(s *aStore, path string) {
			var buf bytes.Buffer
			for rev := int64(101); rev <= 150; rev++ {
				json.NewEncoder(&buf).Encode(Event{Revision: rev, Key: []byte("k"), Value: []byte("v"), At: s.timeOf(rev)})
			}
			if _, err := s.st.Put(t.Context(), segmentKey("", 100, 200), &buf); err != nil {
				t.Fatal(err)
			}
		}, "holds no change past revision 150", false},
		{"the segment missing a revision in the middle", func(s *aStore, path string) {
			var buf bytes.Buffer
			for rev := int64(101); rev <= 200; rev++ {
				if rev != 120 {
					json.NewEncoder(&buf).Encode(Event{Revision: rev, Key: []byte("k"), Value: []byte("v"), At: s.timeOf(rev)})
				}
			}
			if _, err := s.st.Put(t.Context(), segmentKey("", 100, 200), &buf); err != nil {
				t.Fatal(err)
			}
		}, "has no change at revision 120", false},
	} {
		for _, toRevision := range []int64{200, 0} {
			t.Run(tc.name, func(t *testing.T) {
				s := newStore(t)
				s.full(100, "verified")
				s.history(100, 200)
				tc.damage(s, filepath.Join(s.dir, filepath.FromSlash(segmentKey("", 100, 200))))
				p, err := Choose(t.Context(), s.st, toRevision, time.Time{})
				if err == nil {
					var events []Event
					events, err = pointEvents(t.Context(), s.st, p)
					if err == nil {
						t.Fatalf("to revision %d: replays %d changes from backup r100, want a refusal", toRevision, len(events))
					}
				}
				if !strings.Contains(err.Error(), tc.refusal) || (tc.corrupt && !errors.Is(err, store.ErrCorrupt)) {
					t.Fatalf("to revision %d: refused with %q, want it to say %q", toRevision, err, tc.refusal)
				}
				t.Logf("to revision %d: %v", toRevision, err)
			})
		}
	}
}
