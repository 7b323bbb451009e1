package etcdtest

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/ledger"
)

// LoadSpec describes the write load of StartLoad.
type LoadSpec = ledger.Spec

// Write is one write the cluster acknowledged.
type Write = ledger.Write

// Ledger writes uniquely keyed values at a steady rate and records every write the cluster
// acknowledged, so a test can prove later that none of them was lost.
type Ledger = ledger.Ledger

// StartLoad starts a ledger (see package ledger) that stops when the test ends.
func StartLoad(ctx context.Context, t testing.TB, client *clientv3.Client, spec LoadSpec) *Ledger {
	t.Helper()
	l, err := ledger.Start(ctx, client, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Stop(); err != nil {
			t.Errorf("etcdtest: %v", err)
		}
	})
	return l
}

// MissingWrites returns every acknowledged write absent from (or different in) the cluster.
func MissingWrites(ctx context.Context, client *clientv3.Client, acked []Write, opts ...clientv3.OpOption) ([]Write, error) {
	return ledger.Missing(ctx, client, acked, opts...)
}
