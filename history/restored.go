package history

import (
	"time"

	"github.com/etcdmedic/etcdmedic/workload"
)

// CheckRestoredTo checks the history of a workload whose cluster lost every disk and was
// restored from a backup to revision point, after the workload stopped (h.Final is the read of
// the restored cluster). The history up to the loss is checked as Check checks one: each
// client's revisions, each watcher's events, and linearizability (without the final read, which
// comes after the restore). The restored keys are checked against every write acknowledged up
// to the point, as Check's final-state rules do: each still there or overwritten later, no
// delete undone, lease keys kept. Writes acknowledged after the point are lost by design (the
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
	if v := first(finalState(&upToPoint), clientRevisions(h), watchEvents(h)); v != nil {
		return Verdict{Result: Violated, Violation: v}, after
	}
	beforeLoss := *h
	beforeLoss.Final = nil
	return linearizable(&beforeLoss, timeout), after
}
