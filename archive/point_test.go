package archive_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/archive"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/store"
)

// Point-in-time restore: a full backup, then puts, deletes and transactions captured as they
// happen; restored to a revision in the middle, the cluster is exactly what it was at that
// revision (read from the source's own history), and restored to the latest point it is what
// the source holds now. Each acknowledged write reaches the store within a segment.
func TestRestoreToAPointInTime(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_6})
	src := c.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	for i := 0; i < 50; i++ {
		src.Put(ctx, fmt.Sprintf("/registry/pods/p%03d", i), "v0")
	}
	st, err := store.Open(ctx, "file://"+t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	conn := cluster.DefaultConn()
	conn.Endpoints = []string{c.Members()[0].ClientURL}
	full, err := archive.TakeFull(ctx, conn, st, archive.TakeOptions{Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var stored int64
	var lags []time.Duration
	acked := map[int64]time.Time{}
	cctx, stopCapture := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := archive.Capture(cctx, src, st, full.Generation, full.Revision, 200*time.Millisecond, func(s archive.Segment, _ time.Time) {
			mu.Lock()
			defer mu.Unlock()
			for rev, at := range acked {
				if rev <= s.To {
					lags = append(lags, time.Since(at))
					delete(acked, rev)
				}
			}
			stored = s.To
		})
		done <- err
	}()
	var mid, last int64
	var midAt time.Time
	for i := 0; i < 300; i++ {
		var rev int64
		switch i % 3 {
		case 0:
			resp, err := src.Put(ctx, fmt.Sprintf("/registry/pods/p%03d", i%70), fmt.Sprintf("v%d", i))
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		case 1:
			resp, err := src.Delete(ctx, fmt.Sprintf("/registry/pods/p%03d", (i*7)%70))
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		default: // two keys in one revision, as a transaction writes them
			resp, err := src.Txn(ctx).Then(clientv3.OpPut(fmt.Sprintf("/registry/leases/l%d", i), "x"), clientv3.OpPut("/registry/ranges/serviceips", fmt.Sprint(i))).Commit()
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		}
		mu.Lock()
		acked[rev] = time.Now()
		mu.Unlock()
		if i == 150 {
			mid, midAt = rev, time.Now()
		}
		last = rev
	}
	for i := 0; i < 100; i++ {
		mu.Lock()
		s := stored
		mu.Unlock()
		if s >= last {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopCapture()
	<-done
	mu.Lock()
	slowest := time.Duration(0)
	for _, l := range lags {
		slowest = max(slowest, l)
	}
	t.Logf("%d writes captured, the slowest %s after its acknowledgement (segments every 200 ms)", len(lags), slowest.Round(time.Millisecond))
	mu.Unlock()

	for _, tc := range []struct {
		name string
		to   int64
		at   time.Time
		want int64 // 0: whatever revision the time leads to, at most mid
	}{{"to a revision in the middle", mid, time.Time{}, mid}, {"to the latest point", 0, time.Time{}, last}, {"to a time: the last change captured by then", 0, midAt, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := archive.Choose(ctx, st, tc.to, tc.at)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want > 0 && p.Revision < tc.want {
				t.Fatalf("chose %d, want %d", p.Revision, tc.want)
			}
			dataDir := filepath.Join(t.TempDir(), "r1.etcd")
			etcdutl, err := etcdbin.EtcdutlPath(ctx, etcdtest.V3_6)
			if err != nil {
				t.Fatal(err)
			}
			bin := etcdtest.Binary(t, etcdtest.V3_6).Path
			res, err := archive.Restore(ctx, st, p, []archive.Target{{Name: "r1", DataDir: dataDir, PeerURL: "http://127.0.0.1:1"}}, archive.RestoreOptions{Etcdutl: []string{etcdutl}, Etcd: []string{bin}, Scratch: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == 0 { // by time: captured by then, so not after the write acknowledged then
				if res.Revision > mid || res.Revision <= full.Revision {
					t.Fatalf("restored to revision %d for the time of revision %d", res.Revision, mid)
				}
				tc.want = res.Revision
			}
			if res.Revision != tc.want {
				t.Fatalf("restored to revision %d, want %d", res.Revision, tc.want)
			}
			restored := etcdtest.StartOn(t, etcdtest.V3_6, "r1", dataDir)
			want, err := src.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(tc.want))
			if err != nil {
				t.Fatal(err)
			}
			got, err := restored.Get(ctx, "\x00", clientv3.WithFromKey())
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Kvs) != len(want.Kvs) || got.Header.Revision != tc.want {
				t.Fatalf("restored: %d keys at revision %d; the source had %d keys at %d", len(got.Kvs), got.Header.Revision, len(want.Kvs), tc.want)
			}
			for i := range want.Kvs {
				w, g := want.Kvs[i], got.Kvs[i]
				if string(w.Key) != string(g.Key) || string(w.Value) != string(g.Value) || w.ModRevision != g.ModRevision {
					t.Fatalf("key %d: restored %s=%s@%d, the source had %s=%s@%d", i, g.Key, g.Value, g.ModRevision, w.Key, w.Value, w.ModRevision)
				}
			}
		})
	}
}
