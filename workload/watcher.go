package workload

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// watcher watches the workload's prefix and records every event and every error; after an
// error it resumes from the last revision it saw plus one.
type watcher struct {
	cli    *clientv3.Client
	prefix string
	// life is the watcher's context: its watch streams and its progress requests use it.
	life  context.Context
	watch Watch // only run writes it until Stop's wait returns
	// through is the newest revision it has received everything of: its last event, or the
	// revision of a progress notification (0: nothing yet).
	through atomic.Int64
	// requesting is set while a progress request is on its way.
	requesting atomic.Bool
}

// resumeDelay is the pause before a watch is reopened after an error.
const resumeDelay = 100 * time.Millisecond

func (w *watcher) run(ctx context.Context) {
	next := w.watch.StartRevision
	for ctx.Err() == nil {
		next = w.follow(ctx, next)
		select {
		case <-ctx.Done():
		case <-time.After(resumeDelay):
		}
	}
}

// follow watches from revision next until the stream ends and returns where to resume.
func (w *watcher) follow(ctx context.Context, next int64) int64 {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range w.cli.Watch(wctx, w.prefix, clientv3.WithPrefix(), clientv3.WithRev(next)) {
		now := time.Now()
		for _, ev := range resp.Events {
			e := WatchEvent{At: now, Type: PutEvent, Key: string(ev.Kv.Key), Value: string(ev.Kv.Value), Revision: ev.Kv.ModRevision}
			if ev.Type == clientv3.EventTypeDelete {
				e.Type, e.Value = DeleteEvent, ""
			}
			w.watch.Events = append(w.watch.Events, e)
			next = e.Revision + 1
			w.reached(e.Revision)
		}
		if resp.IsProgressNotify() { // every event of the prefix up to its revision was sent
			next = max(next, resp.Header.Revision+1)
			w.reached(resp.Header.Revision)
		}
		if err := resp.Err(); err != nil {
			if ctx.Err() != nil {
				return next
			}
			w.watch.Events = append(w.watch.Events, WatchEvent{At: now, Err: err.Error(), CompactRevision: resp.CompactRevision})
			if resp.CompactRevision > next {
				next = resp.CompactRevision
			}
			return next
		}
	}
	if ctx.Err() == nil {
		w.watch.Events = append(w.watch.Events, WatchEvent{At: time.Now(), Err: "watch channel closed"})
	}
	return next
}

func (w *watcher) reached(rev int64) {
	for {
		old := w.through.Load()
		if rev <= old || w.through.CompareAndSwap(old, rev) {
			return
		}
	}
}

// catchUp waits until the watcher has received everything through revision target or ctx
// ends, asking for a progress notification every progressEvery (the first at once). The request goes on the
// watch's own stream (same context metadata: WithRequireLeader) and may wait for it, so it is
// sent from a goroutine of wg, one at a time.
// progressRequestTimeout bounds one progress request of catchUp.
const progressRequestTimeout = 250 * time.Millisecond

func (w *watcher) catchUp(ctx context.Context, target int64, wg *sync.WaitGroup) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var asked time.Time
	for w.through.Load() < target {
		if time.Since(asked) >= progressEvery && w.requesting.CompareAndSwap(false, true) {
			asked = time.Now()
			wg.Go(func() {
				defer w.requesting.Store(false)
				// Bounded: while the stream reconnects the request blocks, and the next one
				// (to the new stream) must not wait for the drain to end. A lost one is asked again.
				rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(w.life), progressRequestTimeout)
				defer cancel()
				_ = w.cli.RequestProgress(rctx)
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
