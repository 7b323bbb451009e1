package history

import (
	"fmt"
	"sort"

	"github.com/etcdmedic/etcdmedic/workload"
)

// finalState holds every key's last acknowledged write against the final read: a put must
// still be there (or be overwritten by a later revision), a delete must not be undone by an
// older value, and a key put with a lease kept alive to the end must not be gone (unless the
// final read came a whole TTL after the keep-alives stopped with the workload).
func finalState(h *workload.History) []Violation {
	last := map[string]workload.Op{}  // the acknowledged write with the highest revision
	mayBeDeleted := map[string]bool{} // an indeterminate delete, or a lease not kept alive
	expiring := expiryFrom(h)
	for _, op := range h.Ops {
		if op.Kind == workload.Delete && op.Outcome == workload.Indeterminate {
			mayBeDeleted[op.Key] = true
		}
		if _, may := expiring[op.Lease]; op.Lease != 0 && may {
			mayBeDeleted[op.Key] = true
		}
		if op.Wrote() && op.Revision > last[op.Key].Revision {
			last[op.Key] = op
		}
	}
	keys := make([]string, 0, len(last))
	for k := range last {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var found []Violation
	for _, k := range keys {
		if v, bad := judgeKey(last[k], h.Final, mayBeDeleted[k]); bad {
			found = append(found, v)
		}
	}
	return found
}

// judgeKey compares the last acknowledged write w of a key with the final read.
func judgeKey(w workload.Op, final *workload.Final, mayBeDeleted bool) (Violation, bool) {
	kv, present := final.Keys[w.Key]
	seen := fmt.Sprintf("absent at revision %d", final.Revision)
	if present {
		seen = fmt.Sprintf("%q mod_revision %d at revision %d", kv.Value, kv.ModRevision, final.Revision)
	}
	v := Violation{Operation: w.String(), Seen: seen}
	switch {
	case w.Kind == workload.Delete:
		v.Rule, v.Expected = DeleteUndone, fmt.Sprintf("absent, or written after revision %d", w.Revision)
		return v, present && kv.ModRevision < w.Revision
	case !present && final.Revision < w.Revision: // the whole store is older than the write
		v.Rule, v.Expected = LostWrite, fmt.Sprintf("%q, in a store at least at revision %d", w.Value, w.Revision)
		return v, true
	case !present && mayBeDeleted:
		return v, false
	case !present && w.Lease != 0:
		v.Rule, v.Expected = LeaseKeyVanished, fmt.Sprintf("%q (lease %x kept alive)", w.Value, w.Lease)
		return v, true
	case !present:
		v.Rule, v.Expected = LostWrite, fmt.Sprintf("%q or a later write", w.Value)
		return v, true
	}
	v.Rule, v.Expected = LostWrite, fmt.Sprintf("%q at mod_revision %d, or a later write", w.Value, w.Revision)
	return v, kv.ModRevision < w.Revision || (kv.ModRevision == w.Revision && kv.Value != w.Value)
}

// refusedWritesSeen finds the value of a write classified Failed (etcd refused it before
// proposing it: lease not found, no space, auth) in a read, a watch event or the final read:
// the write was applied after all, and the classification that leaves it out of every other
// check was wrong. Values are unique per write, so a value names its write.
func refusedWritesSeen(h *workload.History) []Violation {
	refused := map[string]workload.Op{}
	for _, op := range h.Ops {
		if op.Outcome == workload.Failed && (op.Kind == workload.Put || op.Kind == workload.CompareAndSwap) {
			refused[op.Value] = op
		}
	}
	if len(refused) == 0 {
		return nil
	}
	var found []Violation
	seen := func(value, where string) {
		if op, ok := refused[value]; ok {
			found = append(found, Violation{Rule: RefusedWriteApplied, Operation: op.String(),
				Expected: "never applied: refused before it was proposed", Seen: fmt.Sprintf("its value %q %s", value, where)})
			delete(refused, value)
		}
	}
	for _, op := range h.Ops {
		if op.Kind == workload.Get && op.Outcome == workload.OK && op.Found {
			seen(op.ReadValue, "read by "+op.String())
		}
	}
	for i, w := range h.Watches {
		for _, e := range w.Events {
			if e.Err == "" && e.Type == workload.PutEvent {
				seen(e.Value, fmt.Sprintf("in watcher %d's event at revision %d", i, e.Revision))
			}
		}
	}
	if h.Final != nil {
		keys := make([]string, 0, len(h.Final.Keys))
		for k := range h.Final.Keys {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			kv := h.Final.Keys[k]
			seen(kv.Value, fmt.Sprintf("in the final read of %s at mod_revision %d", k, kv.ModRevision))
		}
	}
	return found
}
