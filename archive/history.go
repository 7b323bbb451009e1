package archive

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/store"
)

const historyPrefix = "history/"

// Event is one change of the key space as the cluster's watch reported it, with when the
// capture received it.
type Event struct {
	Revision int64  `json:"rev"`
	Delete   bool   `json:"delete,omitempty"`
	Key      []byte `json:"key"`
	Value    []byte `json:"value,omitempty"`
	// Lease is the lease the key is attached to (0: none), LeaseTTL the TTL it was granted with
	// (0: unknown, the lease gone before the capture could ask).
	Lease    int64     `json:"lease,omitempty"`
	LeaseTTL int64     `json:"leaseTTL,omitempty"`
	At       time.Time `json:"at"`
}

// Segment is a stretch of history in the store: every event with a revision in (From, To], as
// the capture of Generation received it.
type Segment struct {
	Key        string
	Generation Generation
	From, To   int64
}

// segmentKey is history/<generation>/<from>-<to>.events (history/<from>-<to>.events for the
// empty generation, as etcdmedic stored segments before generations).
func segmentKey(gen Generation, from, to int64) string {
	if gen == "" {
		return fmt.Sprintf("%s%012d-%012d.events", historyPrefix, from, to)
	}
	return fmt.Sprintf("%s%s/%012d-%012d.events", historyPrefix, gen, from, to)
}

func parseSegmentKey(k string) (Segment, bool) {
	var s Segment
	name := strings.TrimSuffix(strings.TrimPrefix(k, historyPrefix), ".events")
	if gen, rest, ok := strings.Cut(name, "/"); ok {
		if !generationPattern.MatchString(gen) {
			return s, false
		}
		s.Generation, name = gen, rest
	}
	// Sscanf stops at the numbers: only a key spelled exactly as segmentKey spells it is a
	// segment (a killed upload's "<key>.<random>.tmp" beside it is not).
	// %d, not %012d: past revision 10^12 the numbers are longer than 12 digits.
	if _, err := fmt.Sscanf(name, "%d-%d", &s.From, &s.To); err != nil || s.To < s.From || segmentKey(s.Generation, s.From, s.To) != k {
		return s, false
	}
	s.Key = k
	return s, true
}

// uncheckedSaid is how many revision checks in a row get no answer before the capture says so.
const uncheckedSaid = 10

// ErrNotStored is history a capture received and could not store before it was asked to end.
var ErrNotStored = errors.New("captured history not stored")

// lastFlushTries is how many times a capture asked to end tries to store what is pending.
const lastFlushTries = 3

// ErrCompacted is a capture that cannot resume: the revisions it needs are compacted away. Take
// a new full backup and capture from it.
var ErrCompacted = errors.New("the history to capture from is compacted")

// Capture watches every key from revision from+1 and stores what it sees as segments of
// generation gen (that of the full backup it continues), one every
// interval (none while nothing changes), until ctx ends. A segment that cannot be stored (the
// store down or slow) is kept and retried with backoff, and what arrives meanwhile joins it:
// nothing captured is dropped. It returns the last revision stored. Progress notifications move
// a segment's end past quiet stretches, so that the recovery point keeps up with the cluster.
// A cluster whose history is no longer the one captured (restored to an earlier point
// underneath the capture, or another cluster) ends it with ErrWentBack (see continuity).
func Capture(ctx context.Context, cli *clientv3.Client, st *store.Store, gen Generation, from int64, interval time.Duration, onStored func(Segment, time.Time)) (int64, error) {
	stored, _, err := capture(ctx, cli, st, gen, unstored{from: from, to: from}, interval, onStored, nil, nil)
	return stored, err
}

// unstored is history a capture received and has not stored: every change in (from, to].
type unstored struct {
	from, to int64
	events   []Event
}

// capture is Capture going on from start: history of gen received before and not stored yet
// (a period of backup run that ended with the store down), kept until stored; the watch
// resumes after it. It returns, with the last revision stored, what it received and could not
// store: the next capture of gen goes on from it, and etcd need not send it again (it may be
// compacted by then).
func capture(ctx context.Context, cli *clientv3.Client, st *store.Store, gen Generation, start unstored, interval time.Duration, onStored func(Segment, time.Time), held *continuity, onUnchecked func(error)) (int64, unstored, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := cli.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(start.to+1), clientv3.WithProgressNotify())
	tick := time.NewTicker(interval)
	defer tick.Stop()
	check := time.NewTicker(min(interval, time.Second))
	defer check.Stop()
	if held == nil {
		held = newContinuity(start.to, 0)
	}
	pending := start.events
	ttls := leaseTTLs{cli: cli}
	stored, seen := start.from, start.to
	backoff, nextTry := time.Duration(0), time.Time{}
	var putErr error
	flush := func() {
		if seen == stored || time.Now().Before(nextTry) {
			return
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for _, e := range pending {
			enc.Encode(e)
		}
		// Not ctx: the last segment is stored when the capture is asked to end too. 30 s, and
		// a second more per MiB (history kept through a store outage is large).
		pctx, pcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second+time.Duration(buf.Len()>>20)*time.Second)
		key := segmentKey(gen, stored, seen)
		_, err := st.Put(pctx, key, &buf)
		pcancel()
		if err != nil {
			putErr = err
			backoff = min(max(2*backoff, time.Second), time.Minute)
			nextTry = time.Now().Add(backoff)
			return
		}
		if onStored != nil {
			onStored(Segment{Key: key, Generation: gen, From: stored, To: seen}, lastAt(pending))
		}
		pending, stored, backoff, nextTry = nil, seen, 0, time.Time{}
	}
	// lastFlush stores what is pending when the capture is asked to end: a few tries, not the
	// backoff's minute. What still cannot be stored is an error, not an end like any other.
	lastFlush := func() error {
		for try := 0; seen != stored && try < lastFlushTries; try++ {
			if try > 0 {
				time.Sleep(time.Duration(try) * time.Second)
			}
			nextTry = time.Time{}
			flush()
		}
		if seen != stored {
			return fmt.Errorf("%w: revisions %d to %d (%d changes) were captured but the store refused them: %v", ErrNotStored, stored+1, seen, len(pending), putErr)
		}
		return nil
	}
	// end ends the capture with why. Asked to end (ctx), the watch ends too, and whichever of
	// the two the loop sees first, what is pending gets lastFlush's tries, and what still cannot
	// be stored is ErrNotStored; otherwise one try, and the caller watches again from stored.
	end := func(why error) (int64, unstored, error) {
		if errors.Is(why, ErrWentBack) {
			// Whatever ends the capture with it (the period's end at the same moment too),
			// the caller must hear it: it starts a new generation. What is pending is the
			// history captured so far (or nothing, when a change showed it): a few tries.
			if err := lastFlush(); err != nil {
				why = errors.Join(why, err)
			}
			return stored, unstored{from: stored, to: seen, events: pending}, why
		}
		if ctx.Err() != nil {
			if err := lastFlush(); err != nil {
				return stored, unstored{from: stored, to: seen, events: pending}, err
			}
			return stored, unstored{from: stored, to: stored}, ctx.Err()
		}
		flush()
		return stored, unstored{from: stored, to: seen, events: pending}, why
	}
	for {
		select {
		case <-ctx.Done():
			return end(ctx.Err())
		case <-tick.C:
			flush()
		case <-check.C:
			// Below what was received, the cluster has received nothing of its new history
			// yet: what is pending is the old one's, and is stored. Past a put it no longer
			// holds, what came after that put may be the new history's: it is not stored.
			if err := held.checkRevision(ctx, cli, seen); err != nil {
				var at *wentBackAt
				if errors.As(err, &at) && at.revision < seen {
					pending, seen = upTo(pending, at.revision), max(stored, at.revision)
				}
				return end(err)
			}
			if held.unchecked == uncheckedSaid && onUnchecked != nil {
				onUnchecked(held.checkErr)
			}
		case resp, ok := <-wch:
			if !ok {
				return end(errors.New("the watch ended"))
			}
			if errors.Is(resp.Err(), rpctypes.ErrCompacted) || resp.CompactRevision > 0 {
				return end(fmt.Errorf("%w (revision %d)", ErrCompacted, resp.CompactRevision))
			}
			if err := resp.Err(); err != nil {
				return end(err)
			}
			if err := held.header(resp.Header); err != nil {
				return end(err) // this response is the other cluster's; what is pending is not
			}
			held.watchResponse(resp.Header)
			now := time.Now().UTC()
			for _, ev := range resp.Events {
				replay, err := held.event(ev)
				if replay {
					continue // a change already received, sent again (an etcd watch bug): once is enough
				}
				if err != nil {
					// Changes of the new history may have come before the first that shows
					// it: nothing received since the last store is stored.
					pending, seen = nil, stored
					return end(fmt.Errorf("%w; revisions after %d were not stored", err, stored))
				}
				e := Event{Revision: ev.Kv.ModRevision, Delete: ev.Type == mvccpb.DELETE, Key: ev.Kv.Key, Value: ev.Kv.Value, Lease: ev.Kv.Lease, At: now}
				if e.Lease != 0 {
					e.LeaseTTL = ttls.of(ctx, e.Lease)
				}
				pending = append(pending, e)
				seen = max(seen, ev.Kv.ModRevision)
			}
			if resp.IsProgressNotify() && resp.Header.Revision > seen {
				seen = resp.Header.Revision
			}
		}
	}
}

func lastAt(events []Event) time.Time {
	if len(events) == 0 {
		return time.Now().UTC()
	}
	return events[len(events)-1].At
}

// Segments lists the history segments in the store, by revision.
func Segments(ctx context.Context, st *store.Store) ([]Segment, error) {
	keys, err := st.List(ctx, historyPrefix)
	if err != nil {
		return nil, err
	}
	var out []Segment
	for _, k := range keys {
		if s, ok := parseSegmentKey(k); ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// chain returns the segments, of one generation, that carry history from revision from up to
// at least to, in order, or the revision where the history stops (a gap, or its end). Segments
// may overlap (in the empty generation, two captures into one store): at each step the one that
// reaches farthest is taken, and a replay skips what it has applied.
func chain(segs []Segment, from, to int64) ([]Segment, int64) {
	var out []Segment
	at := from
	for at < to {
		next := Segment{To: at}
		for _, s := range segs {
			if s.From <= at && s.To > next.To {
				next = s
			}
		}
		if next.To == at {
			return out, at
		}
		out = append(out, next)
		at = next.To
	}
	return out, at
}

// readSegment reads a segment's events.
func readSegment(ctx context.Context, st *store.Store, s Segment) ([]Event, error) {
	r, err := st.Get(ctx, s.Key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s: %w", s.Key, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil && err != io.EOF {
		return nil, fmt.Errorf("%s: %w", s.Key, err)
	}
	return out, nil
}

// Reach is how far the store's history goes: the newest point a restore reaches now.
type Reach struct {
	Backup   string    `json:"backup"`   // the full backup it starts from
	Revision int64     `json:"revision"` // the newest revision a restore reaches
	At       time.Time `json:"at"`       // when that revision's change was captured
	Segments int       `json:"segments"` // segments of history after the backup
}

// ReachOf says how far a restore from the store reaches now: the point a restore to the latest
// point chooses (see Choose), or, when that refuses, the generation's reach from its newest
// full backup that did not fail verification; nil when there is none.
func ReachOf(ctx context.Context, st *store.Store, entries []Entry) (*Reach, error) {
	segs, err := Segments(ctx, st)
	if err != nil {
		return nil, err
	}
	var best *Point
	var unread []*lineageRefusal // generations whose newest history does not read
	for _, l := range lineages(entries, segs) {
		var p *Point
		for i := len(l.entries) - 1; i >= 0 && p == nil; i-- {
			if e := l.entries[i]; e.Usable() {
				p = &Point{Full: e.Full, endAt: e.Taken}
				p.Segments, p.Revision = chain(l.segs, e.Revision, 1<<62)
			}
		}
		if p == nil {
			continue
		}
		if n := len(p.Segments); n > 0 {
			if p.endAt, err = lastCaptured(ctx, st, p.Segments[n-1]); err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				// As Choose has it: only a generation newer than the reach found elsewhere
				// makes the reach unknown.
				unread = append(unread, &lineageRefusal{newest: l.entries[len(l.entries)-1].Taken, err: err})
				continue
			}
		}
		if best == nil || p.laterThan(best, 0, time.Time{}) {
			best = p
		}
	}
	for _, r := range unread {
		if best == nil || r.newest.After(best.endAt) {
			return nil, r.err
		}
	}
	if best == nil {
		return nil, nil
	}
	return &Reach{Backup: best.Full.ID, Revision: best.Revision, At: best.endAt, Segments: len(best.Segments)}, nil
}

// leaseTTLs remembers the TTL each lease was granted with, asked of the cluster once per lease.
type leaseTTLs struct {
	cli  *clientv3.Client
	seen map[int64]int64
}

// of returns lease's granted TTL, 0 when the lease is gone (expired or revoked) or the cluster
// does not answer within a second: the replay then grants it a default.
func (l *leaseTTLs) of(ctx context.Context, lease int64) int64 {
	if ttl, ok := l.seen[lease]; ok {
		return ttl
	}
	if l.seen == nil || len(l.seen) > 100_000 {
		l.seen = map[int64]int64{}
	}
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := l.cli.TimeToLive(lctx, clientv3.LeaseID(lease))
	if err != nil {
		return 0
	}
	l.seen[lease] = max(resp.GrantedTTL, 0)
	return l.seen[lease]
}

// upTo returns the changes of events at or below revision rev.
func upTo(events []Event, rev int64) []Event {
	i := 0
	for i < len(events) && events[i].Revision <= rev {
		i++
	}
	return events[:i]
}
