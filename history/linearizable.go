package history

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/etcdmedic/etcdmedic/workload"
)

// linearizable checks the key-value operations (and the final read, as one get per key) with
// porcupine, one partition per key.
func linearizable(h *workload.History, timeout time.Duration) Verdict {
	ops := porcupineOps(h)
	result, _ := porcupine.CheckOperationsVerbose(kvModel, ops, timeout)
	switch result {
	case porcupine.Ok:
		return Verdict{Result: Passed}
	case porcupine.Unknown:
		return Verdict{Result: Unknown, Why: fmt.Sprintf("the linearizability search of %d operations did not finish in %s", len(ops), timeout)}
	}
	return Verdict{Result: Violated, Violation: locate(ops, timeout)}
}

// locate finds the first key whose operations do not linearize, and in it the operation the
// longest linearization could not take.
func locate(ops []porcupine.Operation, timeout time.Duration) *Violation {
	parts := kvModel.Partition(ops)
	sort.Slice(parts, func(i, j int) bool { return parts[i][0].Input.(kvInput).key < parts[j][0].Input.(kvInput).key })
	for _, part := range parts {
		result, info := porcupine.CheckOperationsVerbose(kvModel, part, timeout)
		if result != porcupine.Illegal {
			continue
		}
		return stuckAt(part, info)
	}
	return &Violation{Rule: NotLinearizable, Operation: "the whole history", Expected: "a linearizable order", Seen: "none (the key could not be located)"}
}

// stuckAt replays the longest partial linearization of part and names the operation that
// returned first among those it could not place.
func stuckAt(part []porcupine.Operation, info porcupine.LinearizationInfo) *Violation {
	var longest []int
	for _, lins := range info.PartialLinearizations() {
		for _, lin := range lins {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	placed := map[int]bool{}
	state := kvModel.Init()
	for _, i := range longest {
		placed[i] = true
		_, state = kvModel.Step(state, part[i].Input, part[i].Output)
	}
	stuck := -1
	for i := range part {
		if !placed[i] && (stuck < 0 || part[i].Return < part[stuck].Return) {
			stuck = i
		}
	}
	v := &Violation{Rule: NotLinearizable, Expected: "a state some order of the operations explains: " + describeState(state.(kvState))}
	if stuck >= 0 {
		v.Operation = part[stuck].Metadata.(workload.Op).String()
		v.Seen = describeOutput(part[stuck].Input.(kvInput), part[stuck].Output.(kvOutput))
	}
	return v
}

// porcupineOps turns the history into porcupine operations: failed ones dropped (they did
// nothing), indeterminate writes with an unknown response and a return time of infinity (they
// may have taken effect at any point after their call, or never), and the final read as a get
// of every key the workload touched or the read found (a key no operation wrote cannot be
// there: from other data, or resurrected).
func porcupineOps(h *workload.History) []porcupine.Operation {
	observed := observedRevisions(h)
	var ops []porcupine.Operation
	keys := map[string]bool{}
	for _, op := range h.Ops {
		if op.Outcome == workload.Failed {
			continue
		}
		keys[op.Key] = true
		in := kvInput{kind: op.Kind, key: op.Key, value: op.Value, expect: op.ExpectModRevision}
		out := kvOutput{atLeast: op.RevisionAtLeast, revision: op.Revision, succeeded: op.Succeeded, deleted: op.Deleted, found: op.Found, value: op.ReadValue, modRevision: op.ModRevision}
		ret := op.End.Sub(h.Start).Nanoseconds()
		if op.Outcome == workload.Indeterminate {
			out = kvOutput{unknown: true, revision: observed[op.Value]}
			if op.Kind == workload.Delete {
				out.revision = 0
			}
			ret = math.MaxInt64
		}
		ops = append(ops, porcupine.Operation{ClientId: op.Client, Input: in, Output: out, Call: op.Start.Sub(h.Start).Nanoseconds(), Return: ret, Metadata: op})
	}
	ops = append(ops, leaseExpiries(h)...)
	if h.Final == nil {
		return ops
	}
	at := h.Final.At.Sub(h.Start).Nanoseconds()
	finalClient := 0
	for _, op := range h.Ops {
		finalClient = max(finalClient, op.Client+1)
	}
	for k := range h.Final.Keys {
		keys[k] = true
	}
	for k := range keys {
		kv, found := h.Final.Keys[k]
		read := workload.Op{Client: finalClient, Kind: workload.Get, Key: k, Start: h.Final.At, End: h.Final.At, Outcome: workload.OK,
			Revision: h.Final.Revision, Found: found, ReadValue: kv.Value, ModRevision: kv.ModRevision}
		ops = append(ops, porcupine.Operation{ClientId: finalClient, Input: kvInput{kind: workload.Get, key: k},
			Output: kvOutput{revision: h.Final.Revision, found: found, value: kv.Value, modRevision: kv.ModRevision}, Call: at, Return: at + 1, Metadata: read})
	}
	return ops
}

// leaseExpiries models each key put with a lease that may have expired by the final read (see
// expiryFrom) as deleted, at some unknown time after the put and the lease's earliest expiry,
// or never.
func leaseExpiries(h *workload.History) []porcupine.Operation {
	expiring := expiryFrom(h)
	var ops []porcupine.Operation
	for _, op := range h.Ops {
		from, may := expiring[op.Lease]
		if op.Lease == 0 || !may || op.Outcome == workload.Failed {
			continue
		}
		if op.Start.After(from) {
			from = op.Start
		}
		expiry := workload.Op{Client: op.Client, Kind: workload.Delete, Key: op.Key, Start: from, Outcome: workload.Indeterminate,
			Err: fmt.Sprintf("lease %x expiry", op.Lease)}
		ops = append(ops, porcupine.Operation{ClientId: op.Client, Input: kvInput{kind: workload.Delete, key: op.Key},
			Output: kvOutput{unknown: true}, Call: from.Sub(h.Start).Nanoseconds(), Return: math.MaxInt64, Metadata: expiry})
	}
	return ops
}

// observedRevisions maps each value some read, watch event or the final read saw to the
// revision that wrote it: an indeterminate write seen there took effect at that revision.
func observedRevisions(h *workload.History) map[string]int64 {
	seen := map[string]int64{}
	for _, op := range h.Ops {
		if op.Kind == workload.Get && op.Found && op.Outcome == workload.OK {
			seen[op.ReadValue] = op.ModRevision
		}
	}
	for _, w := range h.Watches {
		for _, e := range w.Events {
			if e.Type == workload.PutEvent && e.Err == "" {
				seen[e.Value] = e.Revision
			}
		}
	}
	if h.Final != nil {
		for _, kv := range h.Final.Keys {
			seen[kv.Value] = kv.ModRevision
		}
	}
	return seen
}
