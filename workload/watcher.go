package workload

import (
	"context"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// watcher watches the workload's prefix and records every event and every error; after an
// error it resumes from the last revision it saw plus one.
type watcher struct {
	cli    *clientv3.Client
	prefix string
	watch  Watch // only run writes it until Stop's wait returns
	// through is the newest revision it has received an event of (0: none yet).
	through atomic.Int64
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
			w.through.Store(e.Revision)
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
