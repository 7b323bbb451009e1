package history

import (
	"fmt"
	"sort"
	"time"

	"github.com/etcdmedic/etcdmedic/workload"
)

// CheckRestoredTo checks the history of a workload whose cluster lost every disk and was
// restored from a backup to revision point, after the workload stopped (h.Final is the read of
// the restored cluster). The history up to the loss is checked as Check checks one: each
// client's revisions, each watcher's events, and linearizability (without the final read, which
// comes after the restore). The restored keys are checked against every write acknowledged up
// to the point, as Check's final-state rules do: each still there or overwritten later, no
// delete undone, lease keys kept; and each restored key's value and mod revision must be a
// write the history has for that key at that revision, up to the point (restoredValues). Writes acknowledged after the point are lost by design (the
// recovery point): they are left out, and counted in the second result.
func CheckRestoredTo(h *workload.History, point int64, timeout time.Duration) (Verdict, int) {
	if h.Final == nil {
		return Verdict{Result: Unknown, Why: "no read of the restored cluster: nothing restored can be checked"}, 0
	}
	if point <= 0 { // every write would be "after the point": an empty cluster would pass
		return Verdict{Result: Unknown, Why: "no recovery point: the restore is not known to hold anything"}, 0
	}
	upToPoint := *h
	upToPoint.Ops = nil
	after := 0
	for _, op := range h.Ops {
		if op.Wrote() && op.Revision > point {
			after++
			continue
		}
		upToPoint.Ops = append(upToPoint.Ops, op)
	}
	if v := first(finalState(&upToPoint), restoredValues(h, point), refusedWritesSeen(h), clientRevisions(h), realTimeRevisions(h), watchEvents(h)); v != nil {
		return Verdict{Result: Violated, Violation: v}, after
	}
	beforeLoss := *h
	beforeLoss.Final = nil
	return linearizable(&beforeLoss, timeout), after
}

// restoredValues holds each restored key against the writes of the history: its value and mod
// revision must be those of an acknowledged write of that key at exactly that revision, or of an
// indeterminate one (whose revision, if nobody saw it, is known only to be at most the point);
// a restore that replayed the wrong key or value, a partial transaction, or past the point, or
// brought a key nobody wrote, is named.
func restoredValues(h *workload.History, point int64) []Violation {
	type write struct {
		revision int64 // 0: indeterminate
	}
	writes := map[string]map[string][]write{} // key -> value -> writes
	for _, op := range h.Ops {
		if op.Kind != workload.Put && op.Kind != workload.CompareAndSwap {
			continue
		}
		var w write
		switch {
		case op.Wrote():
			w.revision = op.Revision
		case op.Outcome != workload.Indeterminate:
			continue
		}
		if writes[op.Key] == nil {
			writes[op.Key] = map[string][]write{}
		}
		writes[op.Key][op.Value] = append(writes[op.Key][op.Value], w)
	}
	keys := make([]string, 0, len(h.Final.Keys))
	for k := range h.Final.Keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var found []Violation
	for _, k := range keys {
		kv := h.Final.Keys[k]
		v := Violation{
			Rule:      RestoredUnwritten,
			Operation: fmt.Sprintf("restored key %s", k),
			Seen:      fmt.Sprintf("%q mod_revision %d (recovery point %d)", kv.Value, kv.ModRevision, point),
		}
		ok := false
		for _, w := range writes[k][kv.Value] {
			ok = ok || (w.revision == kv.ModRevision && w.revision <= point) || (w.revision == 0 && kv.ModRevision <= point)
		}
		switch {
		case ok:
			continue
		case len(writes[k]) == 0:
			v.Expected = "no such key: no operation of the history wrote it"
		case kv.ModRevision > point:
			v.Expected = fmt.Sprintf("a write at most at the recovery point %d", point)
		default:
			v.Expected = fmt.Sprintf("a value the history wrote to %s at mod_revision %d", k, kv.ModRevision)
		}
		found = append(found, v)
	}
	return found
}
