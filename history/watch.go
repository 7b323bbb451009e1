package history

import (
	"fmt"
	"slices"
	"time"

	"github.com/etcdmedic/etcdmedic/workload"
)

// watchEvents checks each watcher: events in revision order with no repeat, and, between its
// start revision and the last revision it saw, the event of every acknowledged write (unless
// a compaction error said those revisions were gone: from where the watch stood to the
// compaction revision, where it resumed).
func watchEvents(h *workload.History) []Violation {
	var found []Violation
	for i, w := range h.Watches {
		if v, bad := watchOrder(i, w); bad {
			found = append(found, v)
			continue
		}
		if v, bad := watchGap(i, w, h.Ops); bad {
			found = append(found, v)
		}
	}
	writes := indexWrites(h.Ops)
	writes.expiring = expiryFrom(h)
	for i, w := range h.Watches {
		if v, bad := watchContents(i, w, writes); bad {
			found = append(found, v)
		}
	}
	if v, bad := appliedOnce(h.Watches); bad {
		found = append(found, v)
	}
	return found
}

// appliedOnce holds every write to one revision across the watchers: each write's value is its
// own (the workload never writes a value twice), so one value at two revisions is a write
// applied twice, as a log entry re-applied after a bad repair would be.
func appliedOnce(watches []workload.Watch) (Violation, bool) {
	at := map[keyValue]int64{}
	for i, w := range watches {
		for _, e := range w.Events {
			if e.Err != "" || e.Type != workload.PutEvent {
				continue
			}
			kv := keyValue{e.Key, e.Value}
			if rev, seen := at[kv]; seen && rev != e.Revision {
				return Violation{Rule: WatchEventWrong,
					Operation: fmt.Sprintf("watcher %d: %s %s = %q at revision %d", i, e.Type, e.Key, e.Value, e.Revision),
					Expected:  fmt.Sprintf("one write applied once, at revision %d", rev),
					Seen:      fmt.Sprintf("the same write again at revision %d", e.Revision)}, true
			}
			at[kv] = e.Revision
		}
	}
	return Violation{}, false
}

// writeIndex is what the history wrote, for judging watch events: the acknowledged writes by
// revision (more than one only where a restore handed a revision out again), the values of
// indeterminate writes and the keys of indeterminate deletes, and each lease's keys.
type writeIndex struct {
	acked        map[int64][]workload.Op
	maybeValue   map[keyValue]bool
	maybeDeleted map[string]bool
	leaseOf      map[string]int64
	// expiring is when each lease may have expired at the earliest (expiryFrom); a lease not
	// in it was kept alive to the end, and never expired.
	expiring map[int64]time.Time
}

type keyValue struct{ key, value string }

func indexWrites(ops []workload.Op) writeIndex {
	x := writeIndex{acked: map[int64][]workload.Op{}, maybeValue: map[keyValue]bool{}, maybeDeleted: map[string]bool{}, leaseOf: map[string]int64{}}
	for _, op := range ops {
		if op.Lease != 0 && op.Outcome != workload.Failed {
			x.leaseOf[op.Key] = op.Lease
		}
		switch {
		case op.Wrote():
			x.acked[op.Revision] = append(x.acked[op.Revision], op)
		case op.Outcome == workload.Indeterminate && op.Kind == workload.Delete:
			x.maybeDeleted[op.Key] = true
		case op.Outcome == workload.Indeterminate:
			x.maybeValue[keyValue{op.Key, op.Value}] = true
		}
	}
	return x
}

// watchContents holds each event against the write at its revision: the acknowledged write
// there (same key, type and value), or else an indeterminate write of that key and value, an
// indeterminate delete of the key, or the expiry of the key's lease. Only a lease's expiry (or
// revoke) deletes several keys at one revision: the keys of one lease.
func watchContents(i int, w workload.Watch, x writeIndex) (Violation, bool) {
	byRevision := map[int64][]workload.WatchEvent{}
	for _, e := range w.Events {
		if e.Err == "" {
			byRevision[e.Revision] = append(byRevision[e.Revision], e)
		}
	}
	for _, e := range w.Events {
		if e.Err != "" {
			continue
		}
		v := Violation{
			Rule:      WatchEventWrong,
			Operation: fmt.Sprintf("watcher %d: %s %s = %q at revision %d", i, e.Type, e.Key, e.Value, e.Revision),
		}
		if acked := x.acked[e.Revision]; len(acked) > 0 {
			if !slices.ContainsFunc(acked, func(op workload.Op) bool { return eventOf(op, e) }) {
				v.Expected, v.Seen = "the event of "+acked[0].String(), "another event at its revision"
				return v, true
			}
		} else if !x.mayBe(e) {
			v.Expected, v.Seen = "an event of a write of the history", "a write no operation made (no acknowledged write at its revision, no indeterminate one of that value, no lease)"
			return v, true
		} else if lease := x.leaseOf[e.Key]; e.Type == workload.DeleteEvent && !x.maybeDeleted[e.Key] && lease != 0 {
			// Only the lease's expiry deletes the key (the workload revokes none): not before
			// the lease could have expired, and never for a lease kept alive to the end.
			earliest, may := x.expiring[lease]
			if !may || (!e.At.IsZero() && e.At.Before(earliest)) { // zero: when received is not known
				v.Rule = LeaseKeyVanished
				v.Expected = fmt.Sprintf("lease %x alive: kept alive to the end", lease)
				if may {
					v.Expected = fmt.Sprintf("lease %x alive until at least %s", lease, earliest.Format("15:04:05.000"))
				}
				v.Seen = fmt.Sprintf("its key deleted, the event received at %s", e.At.Format("15:04:05.000"))
				return v, true
			}
		}
		if same := byRevision[e.Revision]; len(same) > 1 {
			lease := x.leaseOf[same[0].Key]
			for _, o := range same {
				if o.Type != workload.DeleteEvent || lease == 0 || x.leaseOf[o.Key] != lease {
					v.Expected = "one event per revision, except the deletes of one lease's keys"
					v.Seen = fmt.Sprintf("%d events at revision %d", len(same), e.Revision)
					return v, true
				}
			}
		}
	}
	return Violation{}, false
}

// eventOf reports whether e is the event of the acknowledged write op.
func eventOf(op workload.Op, e workload.WatchEvent) bool {
	if op.Key != e.Key {
		return false
	}
	if op.Kind == workload.Delete {
		return e.Type == workload.DeleteEvent
	}
	return e.Type == workload.PutEvent && e.Value == op.Value
}

// mayBe reports whether an event at a revision no acknowledged write had is an indeterminate
// write's, an indeterminate delete's, or a lease expiry's.
func (x writeIndex) mayBe(e workload.WatchEvent) bool {
	if e.Type == workload.PutEvent {
		return x.maybeValue[keyValue{e.Key, e.Value}]
	}
	return x.maybeDeleted[e.Key] || x.leaseOf[e.Key] != 0
}

type keyRevision struct {
	key      string
	revision int64
}

func watchOrder(i int, w workload.Watch) (Violation, bool) {
	seen := map[keyRevision]bool{}
	var last int64
	for _, e := range w.Events {
		if e.Err != "" {
			continue
		}
		kr := keyRevision{e.Key, e.Revision}
		if seen[kr] || e.Revision < last {
			return Violation{
				Rule:      WatchDuplicate,
				Operation: fmt.Sprintf("watcher %d: %s %s at revision %d", i, e.Type, e.Key, e.Revision),
				Expected:  fmt.Sprintf("each event once, in revision order (last revision %d)", last),
				Seen:      fmt.Sprintf("revision %d again or out of order", e.Revision),
			}, true
		}
		seen[kr] = true
		last = e.Revision
	}
	return Violation{}, false
}

func watchGap(i int, w workload.Watch, ops []workload.Op) (Violation, bool) {
	seen := map[keyRevision]bool{}
	var last int64
	// A compaction error removed only the revisions from where the watch stood to the
	// compaction revision, where it resumed: [next, CompactRevision). Gaps elsewhere are gaps.
	type span struct{ from, to int64 }
	var compacted []span
	next := w.StartRevision
	for _, e := range w.Events {
		if e.Err != "" {
			if e.CompactRevision > next {
				compacted = append(compacted, span{next, e.CompactRevision})
				next = e.CompactRevision
			}
			continue
		}
		seen[keyRevision{e.Key, e.Revision}] = true
		last = max(last, e.Revision)
		next = max(next, e.Revision+1)
	}
	excused := func(rev int64) bool {
		for _, s := range compacted {
			if rev >= s.from && rev < s.to {
				return true
			}
		}
		return false
	}
	for _, op := range ops {
		if !op.Wrote() || op.Revision < w.StartRevision || op.Revision > last || excused(op.Revision) {
			continue
		}
		if !seen[keyRevision{op.Key, op.Revision}] {
			return Violation{
				Rule:      WatchGap,
				Operation: fmt.Sprintf("watcher %d, for %s", i, op),
				Expected:  fmt.Sprintf("an event for %s at revision %d", op.Key, op.Revision),
				Seen:      fmt.Sprintf("no such event, though the watcher reached revision %d", last),
			}, true
		}
	}
	return Violation{}, false
}

// watchStalls finds a watcher that had not received everything through the last acknowledged
// write when it was stopped: its Through (or its last event) is below that write's revision.
// The workload lets its watchers catch up before it stops them, so one still short stalled: a
// stream wedged on a member that no longer applies, or a watch that never resumed. Its events
// up to the stall are checked; everything after would go unchecked.
func watchStalls(h *workload.History) []Violation {
	var target int64
	var last workload.Op
	for _, op := range h.Ops {
		if op.Wrote() && op.Revision > target {
			target, last = op.Revision, op
		}
	}
	var found []Violation
	for i, w := range h.Watches {
		reached := w.Through
		for _, e := range w.Events {
			if e.Err == "" {
				reached = max(reached, e.Revision)
			}
		}
		if target >= w.StartRevision && reached < target {
			found = append(found, Violation{
				Rule:      WatchStalled,
				Operation: fmt.Sprintf("watcher %d (from revision %d), after %s", i, w.StartRevision, last),
				Expected:  fmt.Sprintf("everything through revision %d, the last acknowledged write", target),
				Seen:      fmt.Sprintf("watch stalled at %d", reached),
			})
		}
	}
	return found
}
