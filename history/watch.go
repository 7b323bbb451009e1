package history

import (
	"fmt"

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
	return found
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
