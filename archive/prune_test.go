package archive

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func entry(id string, taken string, rev int64, state string) Entry {
	at, _ := time.Parse(time.RFC3339, taken)
	e := Entry{Full: Full{ID: id, Taken: at, Revision: rev}}
	if state != "unverified" {
		e.Verification = &Verification{Result: state}
	}
	return e
}

// Retention as an operator reads it: the last N, the newest of each day and week, and never the
// newest verified backup, the newest one that did not fail, nor history a kept backup needs.
func TestPruneKeepsWhatRetentionSays(t *testing.T) {
	entries := []Entry{ // oldest first, as List returns them
		entry("a", "2026-11-16T10:00:00Z", 100, "verified"), // week 47
		entry("b", "2026-11-23T10:00:00Z", 200, "verified"), // week 48
		entry("c", "2026-11-30T10:00:00Z", 300, "verified"), // week 49, Monday
		entry("d", "2026-12-01T09:00:00Z", 400, "failed"),
		entry("e", "2026-12-01T21:00:00Z", 500, "failed"),
		entry("f", "2026-12-02T06:00:00Z", 600, "unverified"),
	}
	segs := []Segment{{Key: "s1", From: 100, To: 150}, {Key: "s2", From: 150, To: 200}, {Key: "s3", From: 200, To: 650}}
	for _, tc := range []struct {
		name   string
		r      Retention
		keep   []string
		segs   int
		points int // point verifications removed: of revisions before the oldest kept backup
	}{
		{"the last two, and the newest verified however old", Retention{Last: 2}, []string{"c", "e", "f"}, 2, 2},
		{"the newest of each of the last 2 days", Retention{Daily: 2}, []string{"c", "e", "f"}, 2, 2},
		{"the newest of each of the last 3 weeks (and the newest verified)", Retention{Weekly: 3}, []string{"a", "b", "c", "f"}, 0, 0},
		{"nothing asked: the newest verified and the newest usable stay", Retention{}, []string{"c", "f"}, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanPrune(entries, segs, []int64{150, 250, 320, 650}, tc.r)
			var kept []string
			for _, e := range p.Keep {
				kept = append(kept, e.ID)
			}
			if len(kept) != len(tc.keep) {
				t.Fatalf("kept %v (%v), want %v", kept, p.Why, tc.keep)
			}
			for i := range kept {
				if kept[i] != tc.keep[i] {
					t.Fatalf("kept %v (%v), want %v", kept, p.Why, tc.keep)
				}
			}
			if len(p.Segments) != tc.segs {
				t.Errorf("removes %d history segments (%v), want %d", len(p.Segments), p.SegmentKeys, tc.segs)
			}
			if len(p.PointChecks) != tc.points {
				t.Errorf("removes point verifications %v, want %d", p.PointChecks, tc.points)
			}
		})
	}
}

// Backups are unverified unless backup run was given --verify, and a newer one can fail its
// verification: prune must never leave the store without a backup a restore can use.
func TestPruneNeverRemovesTheLastUsableBackup(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []Entry
		r       Retention
		keep    []string
	}{
		{"nothing verified, nothing asked: the newest stays", []Entry{
			entry("a", "2026-12-01T10:00:00Z", 100, "unverified"),
			entry("b", "2026-12-02T10:00:00Z", 200, "unverified"),
		}, Retention{}, []string{"b"}},
		{"the last one kept failed: the newest that did not fail stays too", []Entry{
			entry("a", "2026-12-01T10:00:00Z", 100, "unverified"),
			entry("b", "2026-12-02T10:00:00Z", 200, "unverified"),
			entry("c", "2026-12-03T10:00:00Z", 300, "failed"),
		}, Retention{Last: 1}, []string{"b", "c"}},
		{"every backup failed: only what retention says", []Entry{
			entry("a", "2026-12-01T10:00:00Z", 100, "failed"),
			entry("b", "2026-12-02T10:00:00Z", 200, "failed"),
		}, Retention{Last: 1}, []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanPrune(tc.entries, nil, nil, tc.r)
			var kept []string
			for _, e := range p.Keep {
				kept = append(kept, e.ID)
			}
			if !slices.Equal(kept, tc.keep) {
				t.Fatalf("kept %v (%v), want %v", kept, p.Why, tc.keep)
			}
		})
	}
}

// A cluster restored to an earlier point starts a new generation at lower revisions. Prune
// judged history by revision across generations: once the old generation's backups were all
// removed, the new one's low revisions kept the old one's history forever, though no restore
// can replay it onto any backup (a restore replays onto a backup only its own generation's).
// Now each generation's history is kept for its own backups; a generation with no backup
// listed is left alone (its run may be storing its first manifest right now), and so is one
// whose backups are all removed while an unreadable manifest, maybe its, is kept; of a
// generation whose newest backup is recent, the history after that backup stays.
func TestPruneRemovesTheHistoryOfAGenerationWithNoBackupLeft(t *testing.T) {
	inGen := func(e Entry, gen Generation) Entry { e.Generation = gen; return e }
	old, restored, starting := "20261120T100000Z-0000000a", "20261202T100000Z-0000000b", "20261203T100000Z-0000000c"
	entries := []Entry{
		inGen(entry("a", "2026-11-20T10:00:00Z", 1000, "unverified"), old),
		inGen(entry("b", "2026-11-21T10:00:00Z", 2000, "unverified"), old),
		inGen(entry("c", "2026-12-02T10:00:00Z", 50, "unverified"), restored),
		inGen(entry("d", "2026-12-02T11:00:00Z", 300, "unverified"), restored),
	}
	segs := []Segment{
		{Key: "old-1", Generation: old, From: 1000, To: 2000}, {Key: "old-2", Generation: old, From: 2000, To: 2500},
		{Key: "restored-1", Generation: restored, From: 50, To: 300}, {Key: "restored-2", Generation: restored, From: 300, To: 400},
		{Key: "starting-1", Generation: starting, From: 400, To: 450},
	}
	removed := func(p PrunePlan) string { return strings.Join(p.SegmentKeys, ",") }
	if got, want := removed(PlanPrune(entries, segs, nil, Retention{Last: 1})), "old-1,old-2,restored-1"; got != want {
		t.Errorf("keeping the newest backup, prune removes history %s; want %s", got, want)
	}
	// The old generation's newest backup a day or less before the store's newest: its run may
	// still be capturing, and store its next backup after prune's listing. The history after
	// its newest listed backup stays.
	recent := slices.Clone(entries)
	recent[1] = inGen(entry("b", "2026-12-01T12:00:00Z", 2000, "unverified"), old)
	if got, want := removed(PlanPrune(recent, segs, nil, Retention{Last: 1})), "old-1,restored-1"; got != want {
		t.Errorf("with the old generation's newest backup recent, prune removes history %s; want %s", got, want)
	}
	withUnreadable := append(slices.Clone(entries), Entry{Full: Full{ID: "x"}, Unreadable: "encrypted to another key"})
	if got, want := removed(PlanPrune(withUnreadable, segs, nil, Retention{Last: 1})), "restored-1"; got != want {
		t.Errorf("with an unreadable manifest kept, prune removes history %s; want %s", got, want)
	}
}
