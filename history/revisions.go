package history

import (
	"fmt"
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
