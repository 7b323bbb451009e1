package archive

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Past revision 10^12 (a cluster restored many times with large --bump-revision values) the
// numbers in a segment's key are longer than 12 digits; the segment is still one.
func TestSegmentKeysPastATrillionRevisions(t *testing.T) {
	for _, gen := range []Generation{"", "20261203T100000Z-3fa9c1d2"} {
		key := segmentKey(gen, 999_999_999_990, 1_000_000_000_005)
		s, ok := parseSegmentKey(key)
		if !ok || s.From != 999_999_999_990 || s.To != 1_000_000_000_005 || s.Generation != gen {
			t.Errorf("%s reads as %+v, %v", key, s, ok)
		}
		if _, ok := parseSegmentKey(key + ".3fa9c1d2e.tmp"); ok {
			t.Errorf("a killed upload beside %s reads as a segment", key)
		}
	}
}

// A manifest whose key and ID differ (copied or renamed, or another tool's file in the store's
// folder) is listed as not readable, and prune keeps it: read by the ID inside, prune would
// have deleted the backup that ID names, and left the file itself.
func TestAManifestNamingAnotherBackupIsNotTakenForIt(t *testing.T) {
	ctx := context.Background()
	st, _ := aFileStore(t)
	taken := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	real := Full{ID: "20261203T100000.000Z-r000000000100", Taken: taken, Revision: 100}
	if err := st.PutJSON(ctx, manifestKey(real.ID), real); err != nil {
		t.Fatal(err)
	}
	if err := st.PutJSON(ctx, manifestKey("20261203T110000.000Z-r000000000200"), real); err != nil { // a copy under another name
		t.Fatal(err)
	}
	entries, err := List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].ID != real.ID || entries[0].Unreadable != "" ||
		entries[1].ID != "20261203T110000.000Z-r000000000200" || !strings.Contains(entries[1].Unreadable, "names backup") {
		t.Fatalf("listed %+v", entries)
	}
	plan := PlanPrune(entries, nil, nil, Retention{Last: 1})
	for _, e := range plan.Remove {
		t.Errorf("prune would remove %s (%s)", e.ID, e.Unreadable)
	}
}
