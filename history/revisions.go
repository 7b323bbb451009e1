package history

import (
	"fmt"
	"slices"
	"sort"

	"github.com/etcdmedic/etcdmedic/workload"
)

// clientRevisions finds a client that saw a lower revision after a higher one: each client
// runs one operation at a time, and every answered operation is linearizable, so the
// revisions it sees never go back.
func clientRevisions(h *workload.History) []Violation {
	byClient := map[int][]workload.Op{}
	for _, op := range h.Ops {
		if op.Outcome == workload.OK {
			byClient[op.Client] = append(byClient[op.Client], op)
		}
	}
	clients := make([]int, 0, len(byClient))
	for c := range byClient {
		clients = append(clients, c)
	}
	sort.Ints(clients)
	var found []Violation
	for _, c := range clients {
		ops := byClient[c]
		sort.SliceStable(ops, func(i, j int) bool { return ops[i].Start.Before(ops[j].Start) })
		for i := 1; i < len(ops); i++ {
			if prev := ops[i-1]; ops[i].Revision < prev.Revision {
				found = append(found, Violation{
					Rule:      RevisionWentBack,
					Operation: ops[i].String(),
					Expected:  fmt.Sprintf("revision ≥ %d (after %s)", prev.Revision, prev),
					Seen:      fmt.Sprintf("revision %d", ops[i].Revision),
				})
				break
			}
		}
	}
	return found
}

// realTimeRevisions finds an answered operation that saw a lower revision than one that ended
// before it started, whatever their clients: etcd's revision only grows, so an operation that
// starts after another ended answers at least at that one's revision, and a write above it.
// Per client only (clientRevisions), a rollback seen by two clients, or by a client's first
// operation after a repair, would pass. Operations whose revision is only a lower bound
// (RevisionAtLeast) bound the later ones but are not judged.
func realTimeRevisions(h *workload.History) []Violation {
	var byStart []workload.Op
	for _, op := range h.Ops {
		if op.Outcome == workload.OK {
			byStart = append(byStart, op)
		}
	}
	byEnd := slices.Clone(byStart)
	slices.SortStableFunc(byStart, func(a, b workload.Op) int { return a.Start.Compare(b.Start) })
	slices.SortStableFunc(byEnd, func(a, b workload.Op) int { return a.End.Compare(b.End) })
	var before workload.Op // the highest revision among the operations ended so far
	j := 0
	for _, op := range byStart {
		for ; j < len(byEnd) && byEnd[j].End.Before(op.Start); j++ {
			if byEnd[j].Revision > before.Revision {
				before = byEnd[j]
			}
		}
		if op.RevisionAtLeast || before.Revision == 0 {
			continue
		}
		want, bad := fmt.Sprintf("revision ≥ %d", before.Revision), op.Revision < before.Revision
		if op.Wrote() {
			want, bad = fmt.Sprintf("revision > %d", before.Revision), op.Revision <= before.Revision
		}
		if bad {
			return []Violation{{
				Rule:      RevisionWentBack,
				Operation: op.String(),
				Expected:  fmt.Sprintf("%s (it started after %s ended)", want, before),
				Seen:      fmt.Sprintf("revision %d", op.Revision),
			}}
		}
	}
	return nil
}
