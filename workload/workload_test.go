package workload_test

import (
	"context"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/workload"
)

// A healthy 3-member v3.6 cluster takes the full mix from 8 clients and 2 watchers, and every
// operation comes back recorded with its outcome.
func TestWorkloadRecordsEveryOperationOnAHealthyCluster(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, Version: etcdtest.V3_6})
	ctx := t.Context()
	w, err := workload.Start(ctx, c.Endpoints(), workload.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	stopAsked := time.Now()
	h := w.Stop()
	if took := time.Since(stopAsked); took > 3*time.Second {
		t.Errorf("Stop took %s, want at most 3 s", took)
	}
	if err := h.ReadFinal(ctx, c.Endpoints(), nil); err != nil {
		t.Fatal(err)
	}
	t.Log(h.Summary())

	counts := h.Counts()
	for _, k := range []workload.Kind{workload.Put, workload.Delete, workload.CompareAndSwap, workload.Get} {
		if counts[k][workload.OK] == 0 {
			t.Errorf("no %s acknowledged", k)
		}
	}
	clients := map[int]bool{}
	for _, op := range h.Ops {
		clients[op.Client] = true
		if op.End.Before(op.Start) {
			t.Fatalf("%v ended before it started", op)
		}
	}
	if len(clients) != 8 {
		t.Errorf("%d clients recorded operations, want 8", len(clients))
	}
	if len(h.Watches) != 2 {
		t.Fatalf("%d watches, want 2", len(h.Watches))
	}
	var lowest int64
	for i, wt := range h.Watches {
		if len(wt.Events) == 0 {
			t.Errorf("watcher %d saw no event", i)
			continue
		}
		var last int64
		for _, e := range wt.Events {
			if e.Err == "" {
				last = e.Revision
			}
		}
		if i == 0 || last < lowest {
			lowest = last
		}
	}
	if got := w.WatchedThrough(); got < lowest || got == 0 {
		t.Errorf("WatchedThrough %d, want at least %d: the lowest of the watchers' newest revisions", got, lowest)
	}
	// Stop let the watchers catch up: each received everything through the last write.
	var lastWrite int64
	for _, op := range h.Ops {
		if op.Wrote() {
			lastWrite = max(lastWrite, op.Revision)
		}
	}
	for i, wt := range h.Watches {
		if wt.Through < lastWrite {
			t.Errorf("watcher %d stopped through revision %d, below the last acknowledged write's %d", i, wt.Through, lastWrite)
		}
	}
	kept := 0
	for _, l := range h.Leases {
		if l.KeptAlive {
			kept++
		}
	}
	if kept != 8 || len(h.Leases) != 16 {
		t.Errorf("%d leases, %d kept alive; want 16 and 8", len(h.Leases), kept)
	}
	if len(h.Final.Keys) == 0 {
		t.Error("final read found no key")
	}
}

// Reads change nothing, so a failed one failed; a write that timed out may have been applied.
func TestOutcomeOfAnError(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if got := workload.OutcomeOf(workload.Get, ctx.Err()); got != workload.Failed {
		t.Errorf("failed get: %s, want failed", got)
	}
	if got := workload.OutcomeOf(workload.Put, ctx.Err()); got != workload.Indeterminate {
		t.Errorf("timed-out put: %s, want indeterminate", got)
	}
	if got := workload.OutcomeOf(workload.Put, nil); got != workload.OK {
		t.Errorf("answered put: %s, want ok", got)
	}
}

func TestWriteOutageIsTheLongestGapBetweenAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	h := &workload.History{Ops: []workload.Op{
		{Kind: workload.Put, Outcome: workload.OK, End: at(0)},
		{Kind: workload.Put, Outcome: workload.OK, End: at(100)},
		{Kind: workload.Put, Outcome: workload.Indeterminate, End: at(2000)},
		{Kind: workload.Get, Outcome: workload.OK, End: at(2500)}, // a read is not a write
		{Kind: workload.CompareAndSwap, Outcome: workload.OK, End: at(3100)},
		{Kind: workload.Delete, Outcome: workload.OK, End: at(3200)},
	}}
	from, to := h.WriteOutage()
	if !from.Equal(at(100)) || !to.Equal(at(3100)) {
		t.Fatalf("outage %s to %s, want 100 ms to 3100 ms", from.Sub(t0), to.Sub(t0))
	}
}

// A paused workload starts no operation until it resumes, every operation in flight has ended
// when Pause returns, and a workload stopped while paused stops.
func TestPausedWorkloadStartsNothingUntilResumed(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_6})
	w, err := workload.Start(t.Context(), c.Endpoints(), workload.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	w.Pause()
	pausedAt := time.Now()
	time.Sleep(time.Second)
	resumedAt := time.Now()
	w.Resume()
	time.Sleep(time.Second)
	w.Pause()
	stopAsked := time.Now()
	h := w.Stop()
	if took := time.Since(stopAsked); took > 3*time.Second {
		t.Errorf("Stop of a paused workload took %s", took)
	}
	after := 0
	for _, op := range h.Ops {
		if op.End.After(pausedAt) && op.Start.Before(resumedAt) {
			t.Fatalf("%v ran while the workload was paused (%s to %s)", op, pausedAt.Format(time.StampMicro), resumedAt.Format(time.StampMicro))
		}
		if op.Start.After(resumedAt) {
			after++
		}
	}
	if after == 0 {
		t.Fatal("no operation after Resume")
	}
}
