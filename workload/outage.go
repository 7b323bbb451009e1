package workload

import (
	"slices"
	"time"
)

// WriteOutage is the longest time the clients went without a write acknowledged: from the end
// of one acknowledged write to the end of the next (puts, deletes and compare-and-swaps, the
// latter whether they swapped or not: the cluster answered). It is what a user of the cluster
// sees of an incident and its repair. Zero when fewer than two writes were acknowledged.
func (h *History) WriteOutage() (from, to time.Time) {
	var ends []time.Time
	for _, op := range h.Ops {
		if op.Kind != Get && op.Outcome == OK {
			ends = append(ends, op.End)
		}
	}
	slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(ends); i++ {
		if ends[i].Sub(ends[i-1]) > to.Sub(from) {
			from, to = ends[i-1], ends[i]
		}
	}
	return from, to
}
