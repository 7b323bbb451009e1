package archive

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/store"
)

// Point is a point in time a restore goes to: a full backup and the history after it.
type Point struct {
	Full     Full      `json:"full"`
	Segments []Segment `json:"-"`
	// overlapping are the other segments of its generation holding revisions it replays:
	// pointEvents checks that they hold the same changes.
	overlapping []Segment
	// Revision is the revision restored; At the capture time of its last event (the full
	// backup's time when no history is replayed).
	Revision int64     `json:"revision"`
	At       time.Time `json:"at"`
	// Reachable is the newest revision the store could restore to from this full backup.
	Reachable int64 `json:"reachable"`
	// toTime, when set, stops the replay at the last event captured at or before it.
	toTime time.Time
	// endAt is when the last change the point's history reaches was captured (the full
	// backup's time without history): Choose compares generations by it.
	endAt time.Time
}

// materialize writes into path a snapshot of the point: the full backup (base, downloaded
// already), and, when history is replayed, that backup restored into a scratch member (etcd),
// the history applied one revision per transaction (so every revision keeps its number), and a
// snapshot taken of it (whose membership is then the scratch member's).
func materialize(ctx context.Context, st *store.Store, p *Point, etcd, etcdutl []string, creds Credentials, base, path string) error {
	events, err := pointEvents(ctx, st, p)
	if err != nil {
		return err
	}
	if len(events) == 0 {
		p.Revision, p.At = p.Full.Revision, p.Full.Taken
		return backup.CopyFile(base, path, 0o600)
	}
	if len(etcd) == 0 {
		return errors.New("replaying the history needs an etcd server (--etcd-command)")
	}
	// A scratch member: its data is snapshotted at the end, never trusted after a crash.
	creds, err = creds.forBackup(&p.Full)
	if err != nil {
		return err
	}
	sm, err := startScratch(ctx, base, filepath.Dir(path), "replay", etcd, etcdutl, creds, "--unsafe-no-fsync")
	if err != nil {
		return err
	}
	defer sm.stop()
	if err := waitServing(ctx, sm); err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(ctx) // the leases live until the snapshot is taken
	defer cancel()
	if err := replayOnto(lctx, sm.cli, events); err != nil {
		return err
	}
	last := events[len(events)-1]
	p.Revision, p.At = last.Revision, last.At
	_, err = backup.SaveSnapshot(ctx, sm.cli, path)
	return err
}

func waitServing(ctx context.Context, sm *scratch) error {
	return sm.answer(ctx, "a read", func(c context.Context) error {
		_, err := sm.cli.Get(c, "etcdmedic/replay")
		return err
	})
}

// heldPastReach refuses a point chosen as late as the store reaches (or by time) when the
// store holds changes past it that the chain from e cannot reach, before toTime: a newer full
// backup that failed verification, or history after a gap. Restoring quietly to the older
// point would drop them; the operator chooses it with --to-revision, knowing what is lost.
func heldPastReach(ctx context.Context, st *store.Store, entries []Entry, segs []Segment, e Entry, reach int64, toTime time.Time) error {
	if toTime.IsZero() {
		held, what := reach, ""
		for _, n := range entries {
			if n.Revision > held {
				held, what = n.Revision, fmt.Sprintf("backup %s (%s) holds revision %d", n.ID, n.State(), n.Revision)
			}
		}
		for _, s := range segs {
			if s.To > held {
				held, what = s.To, fmt.Sprintf("history segment %s holds revisions %d to %d", s.Key, s.From+1, s.To)
			}
		}
		if held > reach {
			return pastReach(e, reach, held, what)
		}
		return nil
	}
	for _, n := range entries {
		if n.Revision > reach && !n.Taken.After(toTime) {
			return pastReach(e, reach, n.Revision, fmt.Sprintf("backup %s (%s), taken at %s, holds revision %d", n.ID, n.State(), n.Taken.Format(time.RFC3339), n.Revision))
		}
	}
	beyond := slices.DeleteFunc(slices.Clone(segs), func(s Segment) bool { return s.To <= reach })
	slices.SortFunc(beyond, func(a, b Segment) int { return cmp.Compare(a.From, b.From) })
	for _, s := range beyond {
		events, err := readSegment(ctx, st, s)
		if err != nil {
			return err
		}
		if len(events) == 0 {
			continue
		}
		if first := events[0]; !first.At.After(toTime) {
			return pastReach(e, reach, first.Revision, fmt.Sprintf("history segment %s holds revision %d, captured at %s", s.Key, first.Revision, first.At.Format(time.RFC3339)))
		}
		return nil // the next change the store holds is after the time asked
	}
	return nil
}

// pastReachError is a point that would stop short of changes the store holds.
type pastReachError struct{ msg string }

func (p *pastReachError) Error() string { return p.msg }

func pastReach(e Entry, reach, held int64, what string) error {
	return &pastReachError{fmt.Sprintf("from backup %s (the newest usable one for this point) the store's history reaches revision %d, but %s: revisions %d to %d cannot be restored (a gap in the history, or a newer backup that failed verification). To restore anyway and lose them, give --to-revision %d", e.ID, reach, what, reach+1, held, reach)}
}
