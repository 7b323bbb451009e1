package kubeworkload

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/history"
	"github.com/etcdmedic/etcdmedic/workload"
)

// ViolationKind names what went wrong.
type ViolationKind string

const (
	// Lost: an acknowledged create or update is missing (or another value is there).
	Lost ViolationKind = "acknowledged write lost"
	// Resurrected: an object whose delete was acknowledged is back.
	Resurrected ViolationKind = "acknowledged delete undone"
	// RevisionBackwards: a write got a resourceVersion no higher than one seen before.
	RevisionBackwards ViolationKind = "resourceVersion went backwards"
	// StaleInformer: an informer's cache still differs from the truth when the wait ends.
	StaleInformer ViolationKind = "informer cache stale"
	// HistoryViolated: the history checker (package history: linearizability with porcupine,
	// final state, client revisions) found the operations, seen as etcd key-value operations,
	// inconsistent.
	HistoryViolated ViolationKind = "history checker"
)

// Violation is one thing the workload saw that must not happen.
type Violation struct {
	Kind     ViolationKind `json:"kind"`
	Object   string        `json:"object,omitempty"`
	Client   int           `json:"client"`
	Server   string        `json:"apiserver,omitempty"`
	Expected string        `json:"expected"`
	Seen     string        `json:"seen"`
}

func (v Violation) String() string {
	where := v.Object
	if v.Server != "" {
		where = "informer on " + v.Server
	}
	return fmt.Sprintf("%s: %s: expected %s, saw %s", v.Kind, where, v.Expected, v.Seen)
}

// InformerResult is how one apiserver's informers ended.
type InformerResult struct {
	APIServer string  `json:"apiserver"`
	Converged bool    `json:"converged"`
	AfterSec  float64 `json:"afterSeconds"` // from the end of writing until its cache equalled the truth
	Differing int     `json:"differing,omitempty"`
}

// Verdict is the check of the whole workload after a repair.
type Verdict struct {
	Passed     bool             `json:"passed"`
	Counts     Counts           `json:"operations"`
	Objects    int              `json:"objects"` // objects that exist at the end
	Violations []Violation      `json:"violations,omitempty"`
	Informers  []InformerResult `json:"informers"`
	// History is the history checker's verdict on every operation ("" when not checked).
	History string `json:"history,omitempty"`
}

// FirstViolation is the first thing that went wrong, or "".
func (v Verdict) FirstViolation() string {
	if len(v.Violations) == 0 {
		return ""
	}
	return v.Violations[0].String()
}

func (v Verdict) String() string {
	if v.Passed {
		if v.History == "" {
			v.History = "not checked"
		}
		return fmt.Sprintf("passed: %d acknowledged (%d refused, %d indeterminate), %d objects as acknowledged, history %s, %d informers converged", v.Counts.Acked, v.Counts.Failed, v.Counts.Indeterminate, v.Objects, v.History, len(v.Informers))
	}
	return fmt.Sprintf("FAILED: %d violations; first: %s", len(v.Violations), v.FirstViolation())
}

// VerifyOptions bound the check.
type VerifyOptions struct {
	// Etcd reads the truth from the cluster (a client over its members).
	Etcd *clientv3.Client
	// InformerWait bounds how long each informer may take to converge; 0 means 30 s.
	InformerWait time.Duration
	// SkipAcknowledged leaves out the lost-write checks: for a restore from an older backup,
	// which drops what was written after it by design.
	SkipAcknowledged bool
}

// Verify stops the writing, reads back every object the clients are unsure of, and checks the
// cluster against what was acknowledged: each object as last acknowledged (read from etcd
// itself), every resourceVersion seen in order, and every informer's cache equal to the truth
// within the wait.
func (w *Workload) Verify(ctx context.Context, opts VerifyOptions) (Verdict, error) {
	if opts.InformerWait == 0 {
		opts.InformerWait = 30 * time.Second
	}
	w.StopWriting()
	var v Verdict
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, c := range w.clients {
		if err := c.resolveAll(rctx); err != nil {
			return v, err
		}
	}
	truth, atRevision, err := readTruth(ctx, opts.Etcd, w.spec.Namespace)
	if err != nil {
		return v, err
	}
	readAt := time.Now()
	v.Counts, v.Objects = w.Counts(), len(truth)
	for _, c := range w.clients {
		c.mu.Lock()
		for _, vi := range c.violations {
			if !opts.SkipAcknowledged || vi.Kind == RevisionBackwards {
				v.Violations = append(v.Violations, vi)
			}
		}
		if !opts.SkipAcknowledged {
			v.Violations = append(v.Violations, c.checkAgainst(truth)...)
		}
		c.mu.Unlock()
	}
	if !opts.SkipAcknowledged {
		hv := history.Check(w.history(truth, atRevision, readAt))
		v.History = hv.String()
		if hv.Result != history.Passed {
			vi := Violation{Kind: HistoryViolated, Expected: "a linearizable history", Seen: hv.String()}
			if hv.Violation != nil {
				vi.Object, vi.Expected, vi.Seen = hv.Violation.Operation, hv.Violation.Expected, string(hv.Violation.Rule)+": "+hv.Violation.Seen
			}
			v.Violations = append(v.Violations, vi)
		}
	}
	want := map[string]string{}
	for name, st := range truth {
		want[name] = st.RV
	}
	for _, r := range w.converge(ctx, want, opts.InformerWait) {
		v.Informers = append(v.Informers, r.InformerResult)
		if !r.Converged {
			v.Violations = append(v.Violations, Violation{Kind: StaleInformer, Server: r.APIServer, Expected: fmt.Sprintf("%d objects as etcd holds them", len(want)), Seen: r.firstDiff})
		}
	}
	v.Passed = len(v.Violations) == 0
	return v, nil
}

// history is every client's operations as etcd key-value operations on keys kind/name, with
// the truth read from etcd as the final read, for package history.
func (w *Workload) history(truth map[string]*State, atRevision int64, at time.Time) *workload.History {
	h := &workload.History{Prefix: w.spec.Namespace, Start: w.started, End: at,
		Final: &workload.Final{At: at, Revision: atRevision, Keys: map[string]workload.KeyValue{}}}
	for _, c := range w.clients {
		c.mu.Lock()
		h.Ops = append(h.Ops, c.ops...)
		c.mu.Unlock()
	}
	slices.SortStableFunc(h.Ops, func(a, b workload.Op) int { return a.End.Compare(b.End) })
	for name, st := range truth {
		h.Final.Keys[name] = workload.KeyValue{Value: st.Data, ModRevision: revision(st.RV)}
	}
	return h
}

// checkAgainst compares each of c's objects with the truth read from etcd.
func (c *client) checkAgainst(truth map[string]*State) []Violation {
	var out []Violation
	for _, o := range c.objects {
		seen := truth[o.String()]
		switch {
		case o.Known == nil && seen != nil:
			out = append(out, Violation{Kind: Resurrected, Object: o.String(), Client: c.id, Expected: "absent", Seen: seen.String()})
		case o.Known != nil && (seen == nil || seen.Data != o.Known.Data):
			out = append(out, Violation{Kind: Lost, Object: o.String(), Client: c.id, Expected: o.Known.String(), Seen: seen.String()})
		}
	}
	return out
}

type convergence struct {
	InformerResult
	firstDiff string
}

// converge waits, up to wait, until each informer's cache equals want (kind/name ->
// resourceVersion).
func (w *Workload) converge(ctx context.Context, want map[string]string, wait time.Duration) []convergence {
	start := time.Now()
	out := make([]convergence, len(w.informers))
	for i, inf := range w.informers {
		out[i].APIServer = inf.server
	}
	for {
		done := true
		for i, inf := range w.informers {
			if out[i].Converged {
				continue
			}
			diff, first := differences(want, inf.cached())
			if diff == 0 {
				out[i].Converged, out[i].AfterSec, out[i].Differing = true, time.Since(start).Seconds(), 0
				continue
			}
			out[i].Differing, out[i].firstDiff, out[i].AfterSec = diff, first, time.Since(start).Seconds()
			done = false
		}
		if done || time.Since(start) > wait || ctx.Err() != nil {
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// differences counts the names whose resourceVersion differs between want and got, and
// describes the first (in name order).
func differences(want, got map[string]string) (int, string) {
	names := map[string]bool{}
	for n := range want {
		names[n] = true
	}
	for n := range got {
		names[n] = true
	}
	n, first := 0, ""
	for _, name := range slices.Sorted(maps.Keys(names)) {
		w, inWant := want[name]
		g, inGot := got[name]
		if inWant == inGot && w == g {
			continue
		}
		n++
		if first == "" {
			first = fmt.Sprintf("%s: etcd has %s, the cache %s", name, rvOrAbsent(w, inWant), rvOrAbsent(g, inGot))
		}
	}
	return n, first
}

func rvOrAbsent(rv string, ok bool) string {
	if !ok {
		return "nothing"
	}
	return "resourceVersion " + rv
}
