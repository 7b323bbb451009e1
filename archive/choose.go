package archive

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/etcdmedic/etcdmedic/store"
)

// Choose picks the point to restore: toRevision (0: as late as the store reaches) or toTime
// (zero: not by time). Each generation of the store (see Generation) offers a point: its
// newest full backup at or before the point that did not fail verification, and its own
// history after that backup, whole up to the point. A restore to a revision takes the point of
// the newest such backup; a restore to the latest point or to a time takes the point whose
// last change was captured latest (up to the time asked): the history the cluster went on
// with. A generation that refuses (it holds changes its point cannot reach) and began after
// that point ends refuses the restore: the store then holds newer changes it cannot restore.
func Choose(ctx context.Context, st *store.Store, toRevision int64, toTime time.Time) (*Point, error) {
	entries, err := List(ctx, st)
	if err != nil {
		return nil, err
	}
	segs, err := Segments(ctx, st)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, errors.New("the store holds no backup")
	}
	var best *Point
	var refusals []*lineageRefusal
	for _, l := range lineages(entries, segs) {
		p, err := l.choose(ctx, st, toRevision, toTime)
		var r *lineageRefusal
		switch {
		case errors.As(err, &r):
			refusals = append(refusals, r)
		case err != nil && ctx.Err() != nil:
			return nil, err
		case err != nil:
			// Its history does not read (a damaged segment): it refuses, and blocks the restore
			// only when its newest backup is newer than the point chosen elsewhere. A damaged
			// old generation must not keep the current one from being restored.
			refusals = append(refusals, &lineageRefusal{newest: l.entries[len(l.entries)-1].Taken, blocking: true, err: err})
		case p != nil && (best == nil || p.laterThan(best, toRevision, toTime)):
			best = p
		}
	}
	for _, r := range refusals {
		if best == nil || (r.blocking && r.newest.After(best.endAt)) {
			return nil, newestRefusal(refusals, best)
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no usable full backup at or before the point asked (revision %d, time %s)", toRevision, toTime.Format(time.RFC3339))
	}
	return best, nil
}

// lineageRefusal is a generation that cannot give the point asked. blocking: it holds changes
// past what it reaches (not merely a revision it does not reach), taken up to newest.
type lineageRefusal struct {
	err      error
	blocking bool
	newest   time.Time // when its newest backup was taken
}

func (r *lineageRefusal) Error() string { return r.err.Error() }
func (r *lineageRefusal) Unwrap() error { return r.err }

// newestRefusal is the refusal of the generation with the newest backup among those that
// refuse past best (all of them when best is nil).
func newestRefusal(refusals []*lineageRefusal, best *Point) error {
	var pick *lineageRefusal
	for _, r := range refusals {
		if best != nil && !(r.blocking && r.newest.After(best.endAt)) {
			continue
		}
		if pick == nil || r.newest.After(pick.newest) {
			pick = r
		}
	}
	return pick.err
}

// laterThan says whether p is the better point than q: to a revision, the one from the newer
// backup; otherwise the one whose last change was captured later (capped at toTime), then the
// newer backup.
func (p *Point) laterThan(q *Point, toRevision int64, toTime time.Time) bool {
	if toRevision == 0 {
		pe, qe := p.endAt, q.endAt
		if !toTime.IsZero() {
			pe, qe = minTime(pe, toTime), minTime(qe, toTime)
		}
		if !pe.Equal(qe) {
			return pe.After(qe)
		}
	}
	return p.Full.Taken.After(q.Full.Taken)
}

func minTime(a, b time.Time) time.Time {
	if a.After(b) {
		return b
	}
	return a
}

// choose is the point the generation gives (nil: no backup of it at or before the point), or
// a *lineageRefusal.
func (l lineage) choose(ctx context.Context, st *store.Store, toRevision int64, toTime time.Time) (*Point, error) {
	newest := l.entries[len(l.entries)-1].Taken
	for i := len(l.entries) - 1; i >= 0; i-- {
		e := l.entries[i]
		switch {
		case !e.Usable():
			continue
		case toRevision > 0 && e.Revision > toRevision:
			continue
		case !toTime.IsZero() && e.Taken.After(toTime):
			continue
		}
		p := &Point{Full: e.Full, Revision: e.Revision, At: e.Taken, toTime: toTime, endAt: e.Taken}
		want := toRevision
		if want == 0 {
			want = 1 << 62
		}
		p.Segments, p.Reachable = chain(l.segs, e.Revision, want)
		p.overlapping = overlapping(l.segs, p.Segments, e.Revision, p.Reachable)
		if toRevision > 0 {
			if p.Reachable < toRevision {
				return nil, &lineageRefusal{newest: newest, err: fmt.Errorf("the store's history after backup %s stops at revision %d: revision %d cannot be reached", e.ID, p.Reachable, toRevision)}
			}
			p.Revision = toRevision
			return p, nil
		}
		p.Revision = p.Reachable
		if err := heldPastReach(ctx, st, l.entries, l.segs, e, p.Reachable, toTime); err != nil {
			var past *pastReachError
			if errors.As(err, &past) {
				return nil, &lineageRefusal{newest: newest, blocking: true, err: err}
			}
			return nil, err
		}
		if n := len(p.Segments); n > 0 {
			at, err := lastCaptured(ctx, st, p.Segments[n-1])
			if err != nil {
				return nil, err
			}
			p.At, p.endAt = at, at
		}
		return p, nil
	}
	return nil, nil
}

// lastCaptured is when the newest change of segment s was captured. A segment holds at least
// one change (every revision is one): an empty one is damaged.
func lastCaptured(ctx context.Context, st *store.Store, s Segment) (time.Time, error) {
	evs, err := readSegment(ctx, st, s)
	if err != nil {
		return time.Time{}, err
	}
	if len(evs) == 0 {
		return time.Time{}, fmt.Errorf("history segment %s holds no change, though it covers revisions %d to %d: it is damaged", s.Key, s.From+1, s.To)
	}
	return evs[len(evs)-1].At, nil
}

// overlapping returns the segments of segs, not in chained, that hold revisions in (from, to].
func overlapping(segs, chained []Segment, from, to int64) []Segment {
	var out []Segment
	for _, s := range segs {
		if s.To > from && s.From < to && !slices.ContainsFunc(chained, func(c Segment) bool { return c.Key == s.Key }) {
			out = append(out, s)
		}
	}
	return out
}
