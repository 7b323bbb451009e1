package archive_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/archive"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/store"
)

// writer puts a new key every 10 ms until stopped, and says the revision of the last one.
func writer(t *testing.T, ctx context.Context, c *etcdtest.Cluster) (stop func() int64) {
	cli := c.Client(t)
	var last atomic.Int64
	done := make(chan struct{})
	wctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(done)
		for i := 0; wctx.Err() == nil; i++ {
			pctx, pcancel := context.WithTimeout(wctx, 30*time.Second)
			resp, err := cli.Put(pctx, fmt.Sprintf("/registry/pods/default/p-%05d", i), "v")
			pcancel()
			if err == nil {
				last.Store(resp.Header.Revision)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return func() int64 { cancel(); <-done; return last.Load() }
}

// aMemberAndAStore starts a one-member v3.6 cluster and opens an empty file:// store in dir,
// with a connection to the member.
func aMemberAndAStore(t *testing.T, ctx context.Context) (c *etcdtest.Cluster, st *store.Store, dir string, conn cluster.Conn) {
	c = etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_6})
	dir = t.TempDir()
	st, err := store.Open(ctx, "file://"+dir, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	conn = cluster.DefaultConn()
	conn.Endpoints = []string{c.Members()[0].ClientURL}
	return c, st, dir, conn
}

// backup run takes a new full backup every --full-every while it captures the history. The
// capture after a full backup goes on from where the one before stopped, not from the new
// backup's revision: the changes made while a full backup was taken and uploaded are in the
// history too. So a restore from the oldest backup reaches the newest change even when every
// newer backup failed its verification.
func TestRunKeepsTheHistoryWholeAcrossFullBackups(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, st, _, conn := aMemberAndAStore(t, ctx)
	// The first endpoint is a member that is down: the backups come from the next one.
	conn.Endpoints = append([]string{"http://" + deadAddress(t)}, conn.Endpoints...)
	stopWriting := writer(t, ctx, c)
	var stored atomic.Int64
	rctx, stopRun := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() {
		ran <- archive.Run(rctx, archive.RunOptions{Conn: conn, Store: st, FullEvery: 1500 * time.Millisecond, Segment: 200 * time.Millisecond,
			Scratch: t.TempDir(), Say: t.Logf, OnStored: func(s archive.Segment, _ time.Time) { stored.Store(s.To) }})
	}()
	var entries []archive.Entry
	var err error
	for i := 0; i < 600 && len(entries) < 4; i++ { // four full backups: three captures after one
		time.Sleep(100 * time.Millisecond)
		if entries, err = archive.List(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	last := stopWriting()
	for i := 0; i < 300 && stored.Load() < last; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	stopRun()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Fatalf("backup run ended with %v, want context.Canceled", err)
	}
	if entries, err = archive.List(ctx, st); err != nil || len(entries) < 4 {
		t.Fatalf("the store lists %d full backups (%v), want at least 4", len(entries), err)
	}
	for _, e := range entries {
		if e.Endpoint != c.Members()[0].ClientURL {
			t.Fatalf("backup %s was taken from %q, want the member that serves", e.ID, e.Endpoint)
		}
	}
	for _, e := range entries[1:] {
		if err := st.PutJSON(ctx, "verify/"+e.ID+".json", archive.Verification{ID: e.ID, Result: "failed", Why: "marked failed by the test"}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := archive.Choose(ctx, st, 0, time.Time{})
	if err != nil {
		t.Fatalf("with every backup but the oldest failed: %v", err)
	}
	if p.Full.ID != entries[0].ID || p.Revision < last {
		t.Fatalf("a restore goes from backup %s to revision %d; want from %s to the last write, %d", p.Full.ID, p.Revision, entries[0].ID, last)
	}
	t.Logf("%d full backups; from the oldest (revision %d) the history reaches revision %d in %d segments", len(entries), entries[0].Revision, p.Revision, len(p.Segments))
}

// A capture asked to end (backup run's SIGTERM) while the store refuses writes says which
// revisions it could not store, rather than ending as if all were kept; a capture started
// again from the last revision it stored gets them from the cluster once the store is back.
func TestCaptureAskedToEndSaysWhatItCouldNotStore(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, st, dir, conn := aMemberAndAStore(t, ctx)
	full, err := archive.TakeFull(ctx, conn, st, archive.TakeOptions{Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cli := c.Client(t)
	capture := func(from int64, until func() bool) (int64, error) {
		cctx, stop := context.WithCancel(ctx)
		defer stop()
		var got atomic.Int64
		got.Store(from)
		done := make(chan struct{})
		var stored int64
		var err error
		go func() {
			defer close(done)
			stored, err = archive.Capture(cctx, cli, st, full.Generation, from, 200*time.Millisecond, func(s archive.Segment, _ time.Time) { got.Store(s.To) })
		}()
		for i := 0; i < 300 && !until(); i++ {
			time.Sleep(100 * time.Millisecond)
		}
		stop()
		<-done
		return stored, err
	}
	stopWriting := writer(t, ctx, c)
	time.Sleep(time.Second)
	// The store refuses every write of history: where its folder goes is a file.
	history := filepath.Join(dir, "history")
	if err := os.WriteFile(history, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	stored, err := capture(full.Revision, func() bool { return time.Now().After(deadline) })
	last := stopWriting()
	if !errors.Is(err, archive.ErrNotStored) {
		t.Fatalf("the capture ended with %v, want archive.ErrNotStored", err)
	}
	t.Logf("asked to end with the store down: %v", err)
	// The store is back; the capture goes on from what it stored.
	if err := os.Remove(history); err != nil {
		t.Fatal(err)
	}
	reached := func() bool {
		p, err := archive.Choose(ctx, st, 0, time.Time{})
		return err == nil && p.Revision >= last
	}
	if _, err := capture(stored, reached); !errors.Is(err, context.Canceled) {
		t.Fatalf("the capture resumed from revision %d ended with %v", stored, err)
	}
	if p, err := archive.Choose(ctx, st, 0, time.Time{}); err != nil || p.Revision < last {
		t.Fatalf("a restore reaches %+v (%v), the last write is at %d", p, err, last)
	}
}

// deadAddress is a 127.0.0.1 address nothing listens on.
func deadAddress(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Full backups that keep failing (the store refuses them) must not stop the history: backup
// run goes on capturing from where it stopped while it retries them, so a restore from the last
// full backup that went through still reaches the newest change.
func TestRunCapturesWhileFullBackupsFail(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, st, dir, conn := aMemberAndAStore(t, ctx)
	stopWriting := writer(t, ctx, c)
	var fullFailures atomic.Int64
	stored, ran, stopRun := runInBackground(t, ctx, conn, st, func(format string, a ...any) {
		if strings.HasPrefix(format, "full backup failed") {
			fullFailures.Add(1)
		}
		t.Logf(format, a...)
	})
	var entries []archive.Entry
	var err error
	for i := 0; i < 600 && len(entries) < 1; i++ {
		time.Sleep(100 * time.Millisecond)
		if entries, err = archive.List(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	// From now on every full backup fails: where the store puts them is a file.
	putBack := refuseWrites(t, filepath.Join(dir, "full"))
	for i := 0; i < 600 && fullFailures.Load() < 3; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	last := stopWriting()
	stopOnceStored(t, stored, last, stopRun, ran)
	if fullFailures.Load() < 3 {
		t.Fatalf("%d full backups failed, want at least 3", fullFailures.Load())
	}
	putBack()
	p, err := archive.Choose(ctx, st, 0, time.Time{})
	if err != nil || p.Revision < last {
		t.Fatalf("a restore reaches %+v (%v); the last write, made while full backups failed, is at %d", p, err, last)
	}
}

// The store down as a period between two full backups ends: the capture cannot store what it
// holds, and backup run goes on (it used to exit, dropping it). What it received is kept and
// stored once the store is back, and the next capture goes on after it: the cluster compacted
// meanwhile (as kube-apiserver does every 5 minutes), and a capture watching again from the last
// revision stored found those revisions gone, and no restore could reach them.
func TestRunGoesOnWhenTheStoreIsDownAsAPeriodEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, st, dir, conn := aMemberAndAStore(t, ctx)
	stopWriting := writer(t, ctx, c)
	var refusedAtPeriodEnd atomic.Int64
	stored, ran, stopRun := runInBackground(t, ctx, conn, st, func(format string, a ...any) {
		if line := fmt.Sprintf(format, a...); strings.Contains(line, "the store refused them") && strings.Contains(line, "the capture goes on") {
			refusedAtPeriodEnd.Add(1)
		}
		t.Logf(format, a...)
	})
	for i := 0; i < 600 && stored.Load() == 0; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	// The store refuses every write of history: where its folder goes is a file.
	putBack := refuseWrites(t, filepath.Join(dir, "history"))
	before := stored.Load() // stored before the outage
	cli := c.Client(t)
	var compacted int64
	for i := 0; i < 100 && compacted == 0; i++ {
		time.Sleep(100 * time.Millisecond)
		if resp, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly()); err == nil && resp.Header.Revision > before+10 && stored.Load() == before {
			compacted = before + 5 // the history after the last revision stored, compacted
			if _, err := cli.Compact(ctx, compacted); err != nil {
				t.Fatal(err)
			}
		}
	}
	if compacted == 0 {
		t.Fatalf("the cluster did not go 10 revisions past %d with the store down", before)
	}
	for i := 0; i < 600 && refusedAtPeriodEnd.Load() < 1; i++ {
		select {
		case err := <-ran:
			t.Fatalf("backup run ended while the store was down: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	putBack()
	last := stopWriting()
	stopOnceStored(t, stored, last, stopRun, ran)
	if refusedAtPeriodEnd.Load() < 1 {
		t.Fatal("no period ended with the store refusing the history")
	}
	p, err := archive.Choose(ctx, st, 0, time.Time{})
	if err != nil || p.Revision < last {
		t.Fatalf("a restore reaches %+v (%v); the last write, made while the store was down, is at %d", p, err, last)
	}
	if p, err := archive.Choose(ctx, st, compacted, time.Time{}); err != nil || p.Revision != compacted {
		t.Fatalf("a restore to revision %d, captured with the store down and compacted since: %+v (%v)", compacted, p, err)
	}
}

// runInBackground starts backup run on st (a full backup every second, history every 200 ms)
// and returns the last revision it stored so far, and how it ended once stop is called.
func runInBackground(t *testing.T, ctx context.Context, conn cluster.Conn, st *store.Store, say func(string, ...any)) (stored *atomic.Int64, ran <-chan error, stop context.CancelFunc) {
	stored = new(atomic.Int64)
	rctx, stop := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() {
		ended <- archive.Run(rctx, archive.RunOptions{Conn: conn, Store: st, FullEvery: time.Second, Segment: 200 * time.Millisecond,
			Scratch: t.TempDir(), Say: say, OnStored: func(s archive.Segment, _ time.Time) { stored.Store(s.To) }})
	}()
	return stored, ended, stop
}

// refuseWrites makes a file:// store refuse every write under folder (where it goes is a file)
// and returns what puts the folder back.
func refuseWrites(t *testing.T, folder string) (putBack func()) {
	if err := os.Rename(folder, folder+".aside"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(folder, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(folder); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(folder+".aside", folder); err != nil {
			t.Fatal(err)
		}
	}
}

// stopOnceStored waits (up to 30 s) until the run has stored revision last, stops it, and
// requires that it ended as stopped, not by an error of its own.
func stopOnceStored(t *testing.T, stored *atomic.Int64, last int64, stop context.CancelFunc, ran <-chan error) {
	t.Helper()
	for i := 0; i < 300 && stored.Load() < last; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Fatalf("backup run ended with %v, want context.Canceled", err)
	}
}
