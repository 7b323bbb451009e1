package archive

import (
	"bytes"
	"context"
	"fmt"

	"github.com/etcdmedic/etcdmedic/store"
)

// pointEvents reads the history a point replays after its full backup, in order, each revision
// once however the segments overlap, and none after the point (its revision or time).
//
// Every revision is at least one change, so the history must hold each revision from the
// backup's up to the point: a segment emptied or cut short (a power cut, a truncation) fails
// the restore, naming it, where the replay would quietly stop short of the point asked. Where
// two segments hold the same revision (the segments of the empty generation, written before
// generations), they must hold the same changes: two histories (a cluster restored to an earlier
// point that went on, two clusters in one store) are never spliced into one.
func pointEvents(ctx context.Context, st *store.Store, p *Point) ([]Event, error) {
	read := map[string][]Event{}
	var events []Event
	last := p.Full.Revision // the newest revision taken
	byTime, done := false, false
	for _, s := range p.Segments {
		evs, err := readSegment(ctx, st, s)
		if err != nil {
			return nil, err
		}
		read[s.Key] = evs
		takingLast := false // this segment gave revision last (a revision is never split)
		for _, e := range evs {
			if e.Revision < last || (e.Revision == last && !takingLast) {
				continue // taken from an earlier segment (compared below)
			}
			// The point is a prefix of the history: the first change past it ends the replay
			// (with a clock stepped back, a later change can carry an earlier time).
			if e.Revision > p.Revision || (!p.toTime.IsZero() && e.At.After(p.toTime)) {
				byTime, done = e.Revision <= p.Revision, true
				break
			}
			if e.Revision > last+1 {
				return nil, fmt.Errorf("history segment %s has no change at revision %d (it covers revisions %d to %d): it is damaged, and the history cannot be replayed past revision %d", s.Key, last+1, s.From+1, s.To, last)
			}
			events = append(events, e)
			last, takingLast = e.Revision, true
		}
		if done {
			break
		}
	}
	if !byTime && last != p.Revision {
		return nil, fmt.Errorf("the history stops at revision %d, short of revision %d: %s", last, p.Revision, shortfallWhy(p, last))
	}
	if err := sameWhereOverlapping(ctx, st, p, events, read); err != nil {
		return nil, err
	}
	return events, nil
}

// shortfallWhy names the segment that should have held revision last+1.
func shortfallWhy(p *Point, last int64) string {
	for _, s := range p.Segments {
		if s.From <= last && last < s.To {
			return fmt.Sprintf("history segment %s covers revisions %d to %d but holds no change past revision %d (emptied or cut short)", s.Key, s.From+1, s.To, last)
		}
	}
	return "no history segment holds the next revision"
}

// sameWhereOverlapping checks that every segment of the point's chain, and every other segment
// of its generation that covers revisions it replays (p.overlapping), holds exactly the changes
// replayed (events) at each of those revisions. read holds the segments read already.
func sameWhereOverlapping(ctx context.Context, st *store.Store, p *Point, events []Event, read map[string][]Event) error {
	if len(events) == 0 {
		return nil
	}
	first, last := events[0].Revision, events[len(events)-1].Revision
	replayed := map[int64][]Event{}
	for _, e := range events {
		replayed[e.Revision] = append(replayed[e.Revision], e)
	}
	for _, s := range append(append([]Segment(nil), p.Segments...), p.overlapping...) {
		lo, hi := max(s.From+1, first), min(s.To, last)
		if lo > hi {
			continue
		}
		evs, ok := read[s.Key]
		if !ok {
			var err error
			if evs, err = readSegment(ctx, st, s); err != nil {
				return err
			}
		}
		held := map[int64][]Event{}
		for _, e := range evs {
			if e.Revision >= lo && e.Revision <= hi {
				held[e.Revision] = append(held[e.Revision], e)
			}
		}
		for rev := lo; rev <= hi; rev++ {
			if !sameChanges(held[rev], replayed[rev]) {
				return fmt.Errorf("the store holds two different histories: at revision %d, history segment %s does not hold the changes replayed from the others (a cluster restored to an earlier point and gone on, or two clusters, backed up into one store before etcdmedic kept generations apart): restore with --to-revision %d or earlier, or move the segments of the other history out of the store", rev, s.Key, rev-1)
			}
		}
	}
	return nil
}

// sameChanges compares two revisions' changes, not when each capture received them.
func sameChanges(a, b []Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Revision != y.Revision || x.Delete != y.Delete || x.Lease != y.Lease || !bytes.Equal(x.Key, y.Key) || !bytes.Equal(x.Value, y.Value) {
			return false
		}
	}
	return true
}
