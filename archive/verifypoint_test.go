package archive_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/archive"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/store"
)

// The scheduled proof that a point in time restores: a full backup, then history with puts,
// deletes, transactions, keys on leases (one kept alive, one left to expire, one from before
// the backup), a compaction of the live cluster, and two captures into one store at once (the
// second from a later revision, so their segments overlap). The newest point, replayed into a
// scratch member, hashes as the live cluster does at that revision. A segment altered in the
// store fails the check, and says so.
func TestVerifyAPointInTime(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_6})
	cli := c.Client(t)
	endpoint := c.Members()[0].ClientURL
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	put := func(key, value string, opts ...clientv3.OpOption) int64 {
		t.Helper()
		resp, err := cli.Put(ctx, key, value, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	grant := func(ttl int64, keepAlive bool) clientv3.LeaseID {
		t.Helper()
		l, err := cli.Grant(ctx, ttl)
		if err != nil {
			t.Fatal(err)
		}
		if keepAlive {
			ch, err := cli.KeepAlive(ctx, l.ID)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for range ch {
				}
			}()
		}
		return l.ID
	}
	before := grant(3, true) // in the snapshot: kept alive in the replay, or it expires there
	for i := 0; i < 20; i++ {
		put(fmt.Sprintf("/registry/events/e%02d", i), "before", clientv3.WithLease(before))
		put(fmt.Sprintf("/registry/pods/p%02d", i), "v0")
	}
	st, err := store.Open(ctx, "file://"+t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	conn := cluster.DefaultConn()
	conn.Endpoints = []string{endpoint}
	full, err := archive.TakeFull(ctx, conn, st, archive.TakeOptions{Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	captures := make(chan int64, 2)
	capture := func(cctx context.Context, from int64) {
		last, _ := archive.Capture(cctx, cli, st, full.Generation, from, 200*time.Millisecond, nil)
		captures <- last
	}
	cctx, stopCapture := context.WithCancel(ctx)
	go capture(cctx, full.Revision)

	kept, expiring := grant(30, true), grant(2, false)
	var last, mid int64
	for i := 0; i < 200; i++ {
		switch i % 4 {
		case 0:
			last = put(fmt.Sprintf("/registry/pods/p%02d", i%30), fmt.Sprintf("v%d", i))
		case 1:
			resp, err := cli.Delete(ctx, fmt.Sprintf("/registry/pods/p%02d", (i*7)%30))
			if err != nil {
				t.Fatal(err)
			}
			last = resp.Header.Revision
		case 2:
			resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision("/registry/ranges/serviceips"), "<", last+1)).
				Then(clientv3.OpPut("/registry/ranges/serviceips", fmt.Sprint(i)), clientv3.OpPut(fmt.Sprintf("/registry/leases/l%d", i), "x", clientv3.WithLease(kept))).Commit()
			if err != nil {
				t.Fatal(err)
			}
			last = resp.Header.Revision
		default:
			last = put(fmt.Sprintf("/registry/events/x%03d", i), "soon gone", clientv3.WithLease(expiring))
		}
		if i == 100 {
			mid = last
			go capture(cctx, mid)                                         // a second backup run into the same store
			if _, err := cli.Compact(ctx, full.Revision+10); err != nil { // as the apiserver compacts
				t.Fatal(err)
			}
		}
	}
	time.Sleep(4 * time.Second) // the unkept lease expires: its keys' deletes are history too
	last = put("/registry/pods/last", "v")
	for i := 0; i < 100; i++ {
		if p, err := archive.Choose(ctx, st, 0, time.Time{}); err == nil && p.Revision >= last {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopCapture()
	<-captures
	<-captures
	if gone, _ := cli.Get(ctx, "/registry/events/x", clientv3.WithPrefix(), clientv3.WithCountOnly()); gone.Count != 0 {
		t.Fatalf("%d keys of the expired lease are still there", gone.Count)
	}

	v, err := archive.VerifyPoint(ctx, st, cli, endpoint, verifyOptions(t))
	if err != nil || v.Result != "verified" || v.Revision < last || v.From != full.ID {
		t.Fatalf("verify the newest point (the last write at %d): %+v %v", last, v, err)
	}
	t.Logf("point r%d verified: backup %s and %d revisions replayed in %.1fs", v.Revision, v.From, v.Replayed, v.Seconds)

	// The last write's value altered in the store (in each capture's segment that holds it):
	// the replay goes through, the hash differs. (A value overwritten before the cluster's
	// compaction would not count: hashkv, like a restore, covers only what is still readable.)
	segs, err := archive.Segments(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	altered := 0
	for _, s := range segs {
		if alterValue(t, st, s.Key, "/registry/pods/last") {
			altered++
		}
	}
	if altered == 0 {
		t.Fatalf("no segment of %v holds the last write", segs)
	}
	v, err = archive.VerifyPoint(ctx, st, cli, endpoint, verifyOptions(t))
	if err != nil || v.Result != "failed" || !strings.Contains(v.Why, "hash") {
		t.Fatalf("verify after a segment was altered: %+v %v", v, err)
	}
	revs, err := archive.PointChecks(ctx, st)
	latest, lerr := archive.LatestPointCheck(ctx, st)
	if err != nil || lerr != nil || len(revs) != 1 || latest.Result != "failed" { // the same point, checked again
		t.Fatalf("point verifications recorded: %v %v, the latest %+v %v", revs, err, latest, lerr)
	}
}

// alterValue rewrites a history segment in the store with key's value changed, if it holds key.
func alterValue(t *testing.T, st *store.Store, segment, key string) bool {
	t.Helper()
	r, err := st.Get(t.Context(), segment)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	altered := false
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var e archive.Event
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatal(err)
		}
		if string(e.Key) == key && !e.Delete {
			e.Value, altered = []byte("not what was written"), true
		}
		json.NewEncoder(&out).Encode(e)
	}
	if altered {
		if _, err := st.Put(t.Context(), segment, &out); err != nil {
			t.Fatal(err)
		}
	}
	return altered
}

// A scratch folder on a full disk: verification cannot run, says why, and records nothing; the
// backup stays unverified rather than being listed as failed (a restore would skip it).
func TestVerifyOnAFullScratchDisk(t *testing.T) {
	t.Parallel()
	st, _, f := backupOf(t, etcdtest.V3_6, 50)
	small := t.TempDir()
	if err := syscall.Mount("tmpfs", small, "tmpfs", 0, "size=8m"); err != nil {
		t.Skipf("a small filesystem is needed (tmpfs mount as root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(small, syscall.MNT_DETACH) })
	opts := verifyOptions(t)
	opts.Scratch = small
	v, err := archive.Verify(t.Context(), st, f, opts)
	if err == nil || !strings.Contains(err.Error(), "MiB free") {
		t.Fatalf("verify into an 8 MiB scratch disk: %+v %v", v, err)
	}
	t.Logf("refused: %v", err)
	entries, err := archive.List(t.Context(), st)
	if err != nil || entries[0].State() != "unverified" {
		t.Fatalf("after a verification that could not run the backup is %s (%v)", entries[0].State(), err)
	}
}
