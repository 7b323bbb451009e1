// Package ledger writes uniquely keyed values to a cluster at a steady rate and remembers every
// write the cluster acknowledged, so that a drill or a test can prove afterwards that none was lost.
package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Spec describes the write load.
type Spec struct {
	// Prefix of every key; one ledger per prefix. "" means "ledger/".
	Prefix string
	// Rate is writes per second; 0 means 100.
	Rate int
	// ValueSize is each value's size in bytes (at least the value's unique header); 0 means 64.
	ValueSize int
	// RequestTimeout bounds each Put; 0 means 2 s.
	RequestTimeout time.Duration
}

// Write is one write the cluster acknowledged.
type Write struct {
	Key   string
	Value string
	// Revision is the cluster revision the Put response reported.
	Revision int64
}

// Ledger writes uniquely keyed values at a steady rate and records every write the cluster
// acknowledged, so a test can prove later that none of them was lost.
type Ledger struct {
	spec   Spec
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu       sync.Mutex
	acked    []Write
	failed   int
	attempts int
}

// Start starts writing prefix+<8-digit sequence> keys through client from one goroutine,
// until Stop or ctx's end. A Put that returned no error is acknowledged; one that failed or
// timed out is counted as failed: its outcome is unknown, it may or may not be in the cluster.
func Start(ctx context.Context, client *clientv3.Client, spec Spec) (*Ledger, error) {
	if spec.Prefix == "" {
		spec.Prefix = "ledger/"
	}
	if spec.Rate <= 0 {
		spec.Rate = 100
	}
	if spec.ValueSize <= 0 {
		spec.ValueSize = 64
	}
	if spec.RequestTimeout <= 0 {
		spec.RequestTimeout = 2 * time.Second
	}
	// A per-ledger nonce in every value: a leftover key from another ledger never matches.
	nonce := make([]byte, 4)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &Ledger{spec: spec, cancel: cancel, done: make(chan struct{})}
	go l.run(ctx, client, hex.EncodeToString(nonce))
	return l, nil
}

func (l *Ledger) run(ctx context.Context, client *clientv3.Client, nonce string) {
	defer close(l.done)
	ticker := time.NewTicker(time.Second / time.Duration(l.spec.Rate))
	defer ticker.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		key := fmt.Sprintf("%s%08d", l.spec.Prefix, seq)
		value := ledgerValue(nonce, seq, l.spec.ValueSize)
		pctx, cancel := context.WithTimeout(ctx, l.spec.RequestTimeout)
		resp, err := client.Put(pctx, key, value)
		cancel()
		l.mu.Lock()
		l.attempts++
		if err == nil {
			l.acked = append(l.acked, Write{Key: key, Value: value, Revision: resp.Header.Revision})
		} else {
			l.failed++
		}
		l.mu.Unlock()
	}
}

func ledgerValue(nonce string, seq, size int) string {
	v := fmt.Sprintf("%s-%08d-", nonce, seq)
	if len(v) < size {
		v += strings.Repeat("x", size-len(v))
	}
	return v
}

// Stop stops the load and waits for the writer (bounded by one request timeout and 5 s more).
// It is safe to call more than once.
func (l *Ledger) Stop() error {
	var err error
	l.once.Do(func() {
		l.cancel()
		select {
		case <-l.done:
		case <-time.After(l.spec.RequestTimeout + 5*time.Second):
			err = fmt.Errorf("ledger writer for %q did not stop", l.spec.Prefix)
		}
	})
	return err
}

// Acked returns every acknowledged write so far, in order.
func (l *Ledger) Acked() []Write {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.acked)
}

// Failed is the number of writes that returned an error (outcome unknown).
func (l *Ledger) Failed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// Attempts is the number of writes tried.
func (l *Ledger) Attempts() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.attempts
}

// missingPageSize is how many keys each range read of MissingWrites fetches.
const missingPageSize = 1000

// missingMaxPages bounds MissingWrites' reads (100 million keys).
const missingMaxPages = 100_000

// Missing reads the keys of acked (paged range reads at one revision) and returns every
// write whose key is absent or holds a different value. Reads are linearizable; pass
// clientv3.WithSerializable() with a Member's Client to check that member's own data.
func Missing(ctx context.Context, client *clientv3.Client, acked []Write, opts ...clientv3.OpOption) ([]Write, error) {
	if len(acked) == 0 {
		return nil, nil
	}
	keys := make([]string, len(acked))
	for i, w := range acked {
		keys[i] = w.Key
	}
	slices.Sort(keys)
	from, end := keys[0], keys[len(keys)-1]+"\x00"

	got := make(map[string]string, len(acked))
	var rev int64
	for page := 0; ; page++ {
		if page == missingMaxPages {
			return nil, fmt.Errorf("read %s..%s: more than %d pages", keys[0], end, missingMaxPages)
		}
		pageOpts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(missingPageSize)}
		if rev > 0 {
			pageOpts = append(pageOpts, clientv3.WithRev(rev))
		}
		resp, err := client.Get(ctx, from, append(pageOpts, opts...)...)
		if err != nil {
			return nil, fmt.Errorf("read %s..%s: %w", from, end, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			got[string(kv.Key)] = string(kv.Value)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}

	var missing []Write
	for _, w := range acked {
		if v, ok := got[w.Key]; !ok || v != w.Value {
			missing = append(missing, w)
		}
	}
	return missing, nil
}
