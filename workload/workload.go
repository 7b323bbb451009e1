// Package workload runs a production-like load against an etcd cluster and records its whole
// client history: concurrent clients doing puts, deletes, compare-and-swap transactions and
// linearizable reads on shared keys, keys attached to leases, and watchers of the prefix. The
// history is what package history checks for linearizability and lost writes.
package workload

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Spec describes the load.
type Spec struct {
	// Prefix of every key; "" means "workload/".
	Prefix string
	// Clients is the number of concurrent clients, each its own connection; 0 means 8.
	Clients int
	// Watchers is the number of watchers of the prefix; 0 means 2.
	Watchers int
	// SharedKeys is how many keys all clients put, delete, swap and read; 0 means 16.
	SharedKeys int
	// LeaseTTL is the TTL in seconds of each client's kept-alive lease; 0 means 10.
	LeaseTTL int64
	// ExpiringLeaseTTL is the TTL of the leases left to expire; 0 means 3.
	ExpiringLeaseTTL int64
	// RequestTimeout bounds each request; 0 means 2 s.
	RequestTimeout time.Duration
	// Seed makes the operation mix reproducible; 0 means 1.
	Seed uint64
	// TLS is the client TLS config; nil means plain.
	TLS *tls.Config
}

func (s Spec) withDefaults() Spec {
	if s.Prefix == "" {
		s.Prefix = "workload/"
	}
	if s.Clients <= 0 {
		s.Clients = 8
	}
	if s.Watchers <= 0 {
		s.Watchers = 2
	}
	if s.SharedKeys <= 0 {
		s.SharedKeys = 16
	}
	if s.LeaseTTL <= 0 {
		s.LeaseTTL = 10
	}
	if s.ExpiringLeaseTTL <= 0 {
		s.ExpiringLeaseTTL = 3
	}
	if s.RequestTimeout <= 0 {
		s.RequestTimeout = 2 * time.Second
	}
	if s.Seed == 0 {
		s.Seed = 1
	}
	return s
}

// Workload is a running load; Stop ends it and returns its history.
type Workload struct {
	spec Spec
	// cancel ends the watchers and the lease keep-alives, stopClients the clients' operations:
	// Stop ends the clients first and lets the watchers catch up before it ends the rest.
	cancel      context.CancelFunc
	stopClients context.CancelFunc
	life        context.Context
	wg          sync.WaitGroup // watchers and keep-alives
	clientsWG   sync.WaitGroup
	clients     []*clientv3.Client
	once        sync.Once
	history     *History

	// gate is held shared by each client for one operation; Pause holds it alone.
	gate   sync.RWMutex
	paused bool // under mu

	mu      sync.Mutex
	ops     []Op
	acked   int // ops with Outcome OK
	watches []*watcher
	leases  []*Lease
}

// Start connects spec.Clients clients and spec.Watchers watchers to endpoints and starts the
// load, until Stop or ctx's end. The watchers start from the revision current at Start.
func Start(ctx context.Context, endpoints []string, spec Spec) (*Workload, error) {
	spec = spec.withDefaults()
	nonce := make([]byte, 4)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	life, cancel := context.WithCancel(ctx)
	ctx, stopClients := context.WithCancel(life)
	w := &Workload{spec: spec, cancel: cancel, stopClients: stopClients, life: life, history: &History{Prefix: spec.Prefix}}
	fail := func(err error) (*Workload, error) {
		cancel()
		w.closeClients()
		return nil, err
	}
	for range spec.Clients + spec.Watchers {
		cli, err := dial(endpoints, spec.TLS)
		if err != nil {
			return fail(err)
		}
		w.clients = append(w.clients, cli)
	}
	rctx, rcancel := context.WithTimeout(ctx, spec.RequestTimeout)
	resp, err := w.clients[0].Get(rctx, spec.Prefix+"workload-start")
	rcancel()
	if err != nil {
		return fail(fmt.Errorf("workload start revision from %v: %w", endpoints, err))
	}
	w.history.Start = time.Now()
	for i := range spec.Watchers {
		wt := &watcher{cli: w.clients[spec.Clients+i], prefix: spec.Prefix, life: life, watch: Watch{StartRevision: resp.Header.Revision + 1}}
		w.watches = append(w.watches, wt)
		w.wg.Go(func() { wt.run(life) })
	}
	for i := range spec.Clients {
		c := newClient(w, i, w.clients[i], hex.EncodeToString(nonce))
		w.clientsWG.Go(func() { c.run(ctx) })
	}
	return w, nil
}

func dial(endpoints []string, tlsConfig *tls.Config) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		TLS:         tlsConfig,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("workload client for %v: %w", endpoints, err)
	}
	return cli, nil
}

// record appends one finished operation to the history.
func (w *Workload) record(op Op) {
	w.mu.Lock()
	w.ops = append(w.ops, op)
	if op.Outcome == OK {
		w.acked++
	}
	w.mu.Unlock()
}

// Acked is how many operations have been acknowledged so far.
func (w *Workload) Acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked
}

// WatchedThrough is the newest revision every watcher has received everything of (its events,
// and the progress notifications that say nothing more came): the lowest of their newest (0
// while one has received nothing).
func (w *Workload) WatchedThrough() int64 {
	var low int64
	for i, wt := range w.watches {
		if r := wt.through.Load(); i == 0 || r < low {
			low = r
		}
	}
	return low
}

// highestAcknowledgedWrite is the revision of the newest write acknowledged so far.
func (w *Workload) highestAcknowledgedWrite() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var rev int64
	for _, op := range w.ops {
		if op.Wrote() {
			rev = max(rev, op.Revision)
		}
	}
	return rev
}

// DrainWait bounds how long Stop waits for the watchers to catch up with the last
// acknowledged write: on a busy 2-core machine a watcher lags by milliseconds, one resuming
// after an error by its client's backoff; one still short after this long is stalled.
const DrainWait = 15 * time.Second

// progressEvery is how often a draining watcher asks its member for a progress notification.
const progressEvery = 250 * time.Millisecond

// drain waits, at most within, until every watcher has received everything through revision
// target, asking for progress notifications meanwhile (a watcher may have nothing more to
// receive: its last event was the last write in the prefix, or it resumed past it).
func (w *Workload) drain(target int64, within time.Duration) {
	if target == 0 || len(w.watches) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(w.life, within)
	defer cancel()
	var wg sync.WaitGroup
	for _, wt := range w.watches {
		wg.Go(func() { wt.catchUp(ctx, target, &w.wg) })
	}
	wg.Wait()
}

// RunUntil lets the workload go on for at least min, then until it has at least n operations
// acknowledged, for at most max in all (or until ctx ends): a drill's history has the size it
// promises whatever the machine's speed, within a bound.
func (w *Workload) RunUntil(ctx context.Context, n int, min, max time.Duration) {
	start := time.Now()
	for time.Since(start) < max && ctx.Err() == nil {
		if time.Since(start) >= min && w.Acked() >= n {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (w *Workload) addLease(l *Lease) {
	w.mu.Lock()
	w.leases = append(w.leases, l)
	w.mu.Unlock()
}

// Stop ends the load and returns the history: it stops the clients (each request is bounded
// by the request timeout), lets every watcher catch up with the last acknowledged write (at
// most DrainWait; what each reached is its Watch.Through, which the checker holds against that
// write), then stops the watchers and the lease keep-alives. Leases are not revoked, so a final
// read still sees the keys attached to them. It is safe to call more than once, and with
// Abandon: the first call stops the workload.
func (w *Workload) Stop() *History {
	return w.stop(DrainWait)
}

// Abandon is Stop without waiting for the watchers: for a cluster that is gone (the watchers
// cannot catch up), or a drill that failed before it judged the history.
func (w *Workload) Abandon() *History {
	return w.stop(0)
}

func (w *Workload) stop(drainWait time.Duration) *History {
	w.once.Do(func() {
		w.stopClients()
		w.Resume()
		w.clientsWG.Wait()
		if drainWait > 0 {
			w.drain(w.highestAcknowledgedWrite(), drainWait)
		}
		w.cancel()
		w.wg.Wait()
		w.closeClients()
		w.mu.Lock()
		defer w.mu.Unlock()
		h := w.history
		h.End = time.Now()
		h.Ops = slices.Clone(w.ops)
		for _, wt := range w.watches {
			watch := wt.watch
			watch.Through = wt.through.Load()
			h.Watches = append(h.Watches, watch)
		}
		for _, l := range w.leases {
			h.Leases = append(h.Leases, *l)
		}
	})
	return w.history
}

func (w *Workload) closeClients() {
	for _, cli := range w.clients {
		cli.Close()
	}
}

// finalPageSize is how many keys each page of ReadFinal reads.
const finalPageSize = 1000

// ReadFinal reads every key under the prefix at one revision (linearizable, paged) into
// h.Final: the state the checker holds acknowledged writes against.
func (h *History) ReadFinal(ctx context.Context, endpoints []string, tlsConfig *tls.Config) error {
	cli, err := dial(endpoints, tlsConfig)
	if err != nil {
		return err
	}
	defer cli.Close()
	f := &Final{At: time.Now(), Keys: map[string]KeyValue{}}
	from, end := h.Prefix, clientv3.GetPrefixRangeEnd(h.Prefix)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(finalPageSize)}
		if f.Revision > 0 {
			opts = append(opts, clientv3.WithRev(f.Revision))
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := cli.Get(rctx, from, opts...)
		cancel()
		if err != nil {
			return fmt.Errorf("final read of %s from %v: %w", h.Prefix, endpoints, err)
		}
		if f.Revision == 0 {
			f.Revision = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			f.Keys[string(kv.Key)] = KeyValue{Value: string(kv.Value), ModRevision: kv.ModRevision}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	h.Final = f
	return nil
}
