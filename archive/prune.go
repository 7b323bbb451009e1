package archive

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/etcdmedic/etcdmedic/store"
)

// Retention is which full backups prune keeps.
type Retention struct {
	// Last keeps the newest Last backups; Daily the newest of each of the last Daily days (UTC)
	// that have one; Weekly the same for ISO weeks.
	Last, Daily, Weekly int
}

// PrunePlan is what prune keeps and removes.
type PrunePlan struct {
	Keep   []Entry  `json:"keep"`
	Remove []Entry  `json:"remove"`
	Why    []string `json:"why"` // per kept entry, in Keep's order
	// Segments are the history segments no kept backup needs: wholly before the oldest kept
	// backup of their generation, or of a generation whose every backup is removed (a restore
	// replays onto a backup only its own generation's history).
	Segments    []Segment `json:"-"`
	SegmentKeys []string  `json:"segments"`
	// PointChecks are the records of point-in-time verifications before the oldest kept backup:
	// points no restore can reach any more.
	PointChecks []string `json:"pointChecks,omitempty"`
	// UploadLeftovers are temporary files of uploads killed mid-way, a day old or more
	// (UploadLeftovers): never a backup, and as large as what they had written.
	UploadLeftovers []string `json:"uploadLeftovers,omitempty"`
}

// PlanPrune decides, with no store: entries oldest first (as List returns them), pointChecks the
// revisions of point verifications (PointChecks). It never removes the newest verified backup,
// the newest backup that did not fail verification, nor history a kept backup's points in time
// need.
func PlanPrune(entries []Entry, segs []Segment, pointChecks []int64, r Retention) PrunePlan {
	why := map[string]string{}
	keep := func(e Entry, reason string) {
		if _, ok := why[e.ID]; !ok {
			why[e.ID] = reason
		}
	}
	// Unreadable manifests have no time nor revision: kept, and not counted.
	newestFirst := slices.DeleteFunc(slices.Clone(entries), func(e Entry) bool { return e.Unreadable != "" })
	slices.Reverse(newestFirst)
	for i, e := range newestFirst {
		if i < r.Last {
			keep(e, fmt.Sprintf("one of the last %d", r.Last))
		}
	}
	byPeriod := func(n int, label string, period func(Entry) string) {
		seen := map[string]bool{}
		for _, e := range newestFirst {
			p := period(e)
			if seen[p] || len(seen) >= n {
				continue
			}
			seen[p] = true
			keep(e, label+" "+p)
		}
	}
	byPeriod(r.Daily, "newest of day", func(e Entry) string { return e.Taken.UTC().Format("2006-01-02") })
	byPeriod(r.Weekly, "newest of week", func(e Entry) string {
		y, w := e.Taken.UTC().ISOWeek()
		return fmt.Sprintf("%d-W%02d", y, w)
	})
	keepNewest(newestFirst, func(e Entry) bool { return e.State() == "verified" }, keep, "the newest verified backup")
	// Verification is optional (backup run verifies only with --verify): the newest backup that
	// did not fail it is what a restore uses, whatever the retention counted.
	keepNewest(newestFirst, Entry.Usable, keep, "the newest backup a restore can use (not failed)")
	for _, e := range entries {
		if e.Unreadable != "" {
			keep(e, "its manifest does not read: look at it ("+e.Unreadable+")")
		}
	}
	var plan PrunePlan
	oldestKept := int64(-1)
	gens := map[Generation]*generationKept{}
	unreadable := false
	var storeNewest time.Time // the newest backup's time: the store's "now"
	for _, e := range entries {
		g := gens[e.Generation]
		if g == nil && e.Unreadable == "" {
			g = &generationKept{oldest: -1}
			gens[e.Generation] = g
		}
		if g != nil && e.Unreadable == "" {
			g.newest = max(g.newest, e.Revision)
			if e.Taken.After(g.newestTaken) {
				g.newestTaken = e.Taken
			}
			if e.Taken.After(storeNewest) {
				storeNewest = e.Taken
			}
		}
		if reason, ok := why[e.ID]; ok {
			plan.Keep, plan.Why = append(plan.Keep, e), append(plan.Why, reason)
			if e.Unreadable != "" {
				unreadable = true
				continue
			}
			if oldestKept < 0 || e.Revision < oldestKept {
				oldestKept = e.Revision
			}
			if g.oldest < 0 || e.Revision < g.oldest {
				g.oldest = e.Revision
			}
			continue
		}
		plan.Remove = append(plan.Remove, e)
	}
	for _, s := range segs {
		if gens[s.Generation].needless(s, unreadable, storeNewest) {
			plan.Segments = append(plan.Segments, s)
			plan.SegmentKeys = append(plan.SegmentKeys, s.Key)
		}
	}
	for _, rev := range pointChecks {
		if oldestKept >= 0 && rev < oldestKept {
			plan.PointChecks = append(plan.PointChecks, pointVerifyKey(rev))
		}
	}
	return plan
}

// generationKept is what prune keeps of one generation's backups: the revision of its oldest
// kept one (-1: none kept), and the revision and time of its newest listed one.
type generationKept struct {
	oldest, newest int64
	newestTaken    time.Time
}

// endedAfter is how long after a generation's newest backup, newer backups of others in the
// store, it is taken for ended: a backup run takes a full backup far more often (--full-every).
const endedAfter = 24 * time.Hour

// needless says whether segment s, of a generation g holds (nil: a generation with no backup
// listed), is history no kept backup needs. A generation with no backup listed is left alone:
// a backup run may be storing its first backup's manifest just now. Of one whose every listed
// backup is removed, the history up to the newest of them goes, and the rest once that backup
// is a day older than the store's newest (storeNewest): before, a run still capturing it may
// store its next backup, which needs what follows, after the listing. Nothing of it goes while
// an unreadable manifest is kept: that backup may be this generation's.
func (g *generationKept) needless(s Segment, unreadable bool, storeNewest time.Time) bool {
	switch {
	case g == nil:
		return false
	case g.oldest < 0:
		return !unreadable && (s.To <= g.newest || storeNewest.Sub(g.newestTaken) > endedAfter)
	}
	return s.To <= g.oldest
}

// keepNewest keeps the newest entry (newestFirst) that is what usable says, with reason.
func keepNewest(newestFirst []Entry, usable func(Entry) bool, keep func(Entry, string), reason string) {
	for _, e := range newestFirst {
		if usable(e) {
			keep(e, reason)
			return
		}
	}
}

// Prune carries out a plan: each removed backup's manifest first (it is no longer listed),
// then its data and its verification, then the history no kept backup needs, the
// verifications of points before it, and the temporary files of uploads killed long ago.
func Prune(ctx context.Context, st *store.Store, p PrunePlan) error {
	for _, e := range p.Remove {
		for _, k := range []string{manifestKey(e.ID), e.DataKey(), verifyPrefix + e.ID + ".json"} {
			if err := st.Delete(ctx, k); err != nil {
				return err
			}
		}
	}
	for _, s := range p.Segments {
		if err := st.Delete(ctx, s.Key); err != nil {
			return err
		}
	}
	for _, k := range append(slices.Clone(p.PointChecks), p.UploadLeftovers...) {
		if err := st.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}
