package history

import (
	"fmt"

	"github.com/anishathalye/porcupine"

	"github.com/etcdmedic/etcdmedic/workload"
)

// kvInput is one request on one key.
type kvInput struct {
	kind   workload.Kind
	key    string
	value  string
	expect int64 // a compare-and-swap's expected mod revision
}

// kvOutput is its response; unknown for an indeterminate write, whose revision is known only
// when a read or a watch event saw its value (0 otherwise).
type kvOutput struct {
	unknown bool
	// atLeast: revision is only a lower bound (workload.Op.RevisionAtLeast).
	atLeast     bool
	revision    int64
	succeeded   bool
	deleted     int64
	found       bool
	value       string
	modRevision int64
}

// kvState is one key as etcd keeps it: its value and the revision that last wrote it.
// modRevision is unknownRevision after an indeterminate write nobody saw the revision of;
// the next read that sees the value learns it.
type kvState struct {
	present     bool
	value       string
	modRevision int64
}

const unknownRevision = -1

// kvModel is etcd's key-value store seen one key at a time. Revisions are global, so per key
// the model checks what a key can show: each write's revision is above the key's mod revision
// before it, a read sees the value and mod revision of the last write, a compare-and-swap
// succeeds exactly when the mod revision matches, a delete removes the key (mod revision 0,
// what a comparison on an absent key sees) at a revision above the key's writes and reports
// whether it was there, and an answer comes at a revision at least the key's last write's.
var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			k := op.Input.(kvInput).key
			if _, ok := byKey[k]; !ok {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		parts := make([][]porcupine.Operation, 0, len(order))
		for _, k := range order {
			parts = append(parts, byKey[k])
		}
		return parts
	},
	Init: func() any { return kvState{} },
	Step: func(state, input, output any) (bool, any) {
		return step(state.(kvState), input.(kvInput), output.(kvOutput))
	},
	DescribeOperation: func(input, output any) string {
		return describeOutput(input.(kvInput), output.(kvOutput))
	},
	DescribeState: func(state any) string { return describeState(state.(kvState)) },
}

func step(s kvState, in kvInput, out kvOutput) (bool, any) {
	switch in.kind {
	case workload.Get:
		if out.found != s.present || (out.found && out.value != s.value) {
			return false, s
		}
		if s.modRevision == unknownRevision {
			s.modRevision = out.modRevision
			return true, s
		}
		return !out.found || out.modRevision == s.modRevision, s
	case workload.Put:
		return write(s, in.value, out)
	case workload.Delete:
		return deleteKey(s, out)
	case workload.CompareAndSwap:
		return compareAndSwap(s, in, out)
	}
	return false, s
}

// compareAndSwap applies a compare-and-swap. An indeterminate one is applied whenever its
// comparison may hold: its return time is infinity, so an order that places it last (where it
// changes nothing anyone saw) covers the case where it never took effect.
//
// After an indeterminate write nobody saw, the key's mod revision is unknown, but it is one no
// client can expect: clients learn revisions only from their own answers and from reads, and a
// read of that write would have made its revision known. So no compare-and-swap can succeed
// there (an unknown revision is not a wildcard: it would let a stale swap through).
func compareAndSwap(s kvState, in kvInput, out kvOutput) (bool, any) {
	unknownBefore := s.modRevision == unknownRevision
	if out.unknown {
		if !unknownBefore && s.modRevision == in.expect {
			return write(s, in.value, out)
		}
		return true, s
	}
	if unknownBefore {
		return !out.succeeded, s
	}
	if out.succeeded != (s.modRevision == in.expect) {
		return false, s
	}
	if !out.succeeded {
		return true, s
	}
	return write(s, in.value, out)
}

// deleteKey applies a delete: one that was answered removed the key exactly when it was there,
// at a revision above the mod revision of what it removed. Past revisions are not part of the
// state (each would make states of their own, and porcupine's search grows with them: a
// drill's outage with a hundred timed-out writes went from 0.6 to 6 million steps): that a
// delete, a read or a failed swap answered at a revision at least that of every write that
// ended before it started is checked over the whole history in one pass (realTimeRevisions).
func deleteKey(s kvState, out kvOutput) (bool, any) {
	if out.unknown {
		return true, kvState{}
	}
	if (out.deleted > 0) != s.present {
		return false, s
	}
	if out.deleted > 0 && !out.atLeast && s.modRevision != unknownRevision && out.revision <= s.modRevision {
		return false, s
	}
	return true, kvState{}
}

// write applies a write of value at out.revision, which must be above the key's mod revision.
func write(s kvState, value string, out kvOutput) (bool, any) {
	if out.revision == 0 { // an indeterminate write nobody saw
		return true, kvState{present: true, value: value, modRevision: unknownRevision}
	}
	if s.modRevision != unknownRevision && out.revision <= s.modRevision {
		return false, s
	}
	return true, kvState{present: true, value: value, modRevision: out.revision}
}

func describeState(s kvState) string {
	if !s.present {
		return "absent"
	}
	if s.modRevision == unknownRevision {
		return fmt.Sprintf("%q (mod_revision unknown)", s.value)
	}
	return fmt.Sprintf("%q mod_revision %d", s.value, s.modRevision)
}

func describeOutput(in kvInput, out kvOutput) string {
	if out.unknown {
		return fmt.Sprintf("%s %s: no answer (may have taken effect)", in.kind, in.key)
	}
	switch in.kind {
	case workload.Get:
		if !out.found {
			return fmt.Sprintf("get %s: absent at revision %d", in.key, out.revision)
		}
		return fmt.Sprintf("get %s: %q mod_revision %d at revision %d", in.key, out.value, out.modRevision, out.revision)
	case workload.CompareAndSwap:
		return fmt.Sprintf("compare-and-swap %s = %q if mod_revision == %d: succeeded=%v at revision %d", in.key, in.value, in.expect, out.succeeded, out.revision)
	case workload.Delete:
		return fmt.Sprintf("delete %s: deleted %d at revision %d", in.key, out.deleted, out.revision)
	}
	return fmt.Sprintf("put %s = %q at revision %d", in.key, in.value, out.revision)
}
