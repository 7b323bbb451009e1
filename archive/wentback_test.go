package archive_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/archive"
)

// The runbook's "restore the cluster from last night's copy", done while backup run goes on
// capturing: the member is stopped, its data dir replaced with a copy from before, and started
// again. The cluster goes on under revision numbers the run has already captured, with other
// changes. The run notices that its history went back, starts a new generation from a new full
// backup, and the newest point a restore reaches is the cluster as it is now: the replayed hash
// equals the cluster's. Before, the run went on watching from where it was, stored the new
// changes after the old ones, and a restore to the latest point replayed the two as one.
//
// Four restores: one whose cluster waits before it takes writes again (the run sees the
// cluster's revision below what it captured), one that goes on at once, past the revisions
// captured before the run looks (the run sees a key's history differ from the one captured),
// and two out of the run's sight (its connection cut) that go on past them with new keys
// only: every change the run then receives is a key created, and only the change the
// cluster holds at the revision of a change the run received before the cut tells the
// histories apart. In the last, the copy put back is newer than every put captured: only
// deletes came after it.
func TestBackupRunNoticesTheClusterRestoredUnderneathIt(t *testing.T) {
	t.Parallel()
	for _, how := range []restore{writesAfterAWhile, writesAtOnce, newKeysOutOfSight, afterTheLastPut} {
		t.Run(string(how), func(t *testing.T) {
			t.Parallel()
			restoredUnderneathARun(t, how)
		})
	}
}

// restore is how the cluster is restored underneath the run, and goes on.
type restore string

const (
	writesAfterAWhile restore = "writes after a while"
	writesAtOnce      restore = "writes at once"
	newKeysOutOfSight restore = "new keys only, out of the run's sight"
	afterTheLastPut   restore = "to a copy newer than every put captured, out of the run's sight"
)

func restoredUnderneathARun(t *testing.T, how restore) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, st, _, conn := aMemberAndAStore(t, ctx)
	m := c.Members()[0]
	sight := newClientGate(t, conn.Endpoints[0]) // the run's way to the member
	conn.Endpoints = []string{sight.url()}
	cli := c.Client(t)
	put := func(key, value string) int64 {
		t.Helper()
		for try := 0; ; try++ { // the member may be starting again
			pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := cli.Put(pctx, key, value)
			pcancel()
			if err == nil {
				return resp.Header.Revision
			}
			if try == 50 {
				t.Fatalf("put %s: %v", key, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for i := range 20 {
		put(fmt.Sprintf("/registry/pods/p%02d", i), "v0")
	}
	// copyNow copies the data dir as it is now (the member stopped a moment).
	copyNow := func() string {
		t.Helper()
		if err := m.Stop(); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir() + "/copy"
		if out, err := exec.Command("cp", "-a", m.DataDir, dir).CombinedOutput(); err != nil {
			t.Fatalf("copy the data dir: %v: %s", err, out)
		}
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
		for try := 0; ; try++ { // serving again (a read: the copy holds the newest change)
			gctx, gcancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := cli.Get(gctx, "/registry/namespaces/default")
			gcancel()
			if err == nil {
				break
			}
			if try == 50 {
				t.Fatalf("the member does not serve again: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		return dir
	}
	// Last night's copy: the data dir as it is now, at the 20 pods' revision.
	lastNight := copyNow()

	var mu sync.Mutex
	storedTo := map[archive.Generation]int64{} // by generation, the newest revision stored
	var said []string
	rctx, stopRun := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() {
		ran <- archive.Run(rctx, archive.RunOptions{Conn: conn, Store: st, FullEvery: time.Hour, Segment: 200 * time.Millisecond, Scratch: t.TempDir(),
			Say: func(format string, a ...any) {
				mu.Lock()
				defer mu.Unlock()
				said = append(said, fmt.Sprintf(format, a...))
			},
			OnStored: func(s archive.Segment, _ time.Time) {
				mu.Lock()
				defer mu.Unlock()
				storedTo[s.Generation] = max(storedTo[s.Generation], s.To)
			}})
	}()
	// waitStored waits until a generation other than not has stored rev, and returns it.
	waitStored := func(rev int64, not archive.Generation) archive.Generation {
		t.Helper()
		for i := 0; i < 600; i++ {
			mu.Lock()
			for gen, to := range storedTo {
				if to >= rev && gen != not {
					mu.Unlock()
					return gen
				}
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("revision %d not stored in a generation other than %q; stored %v; the run said:\n%s", rev, not, storedTo, strings.Join(said, "\n"))
		return ""
	}
	saidWentBack := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(strings.Join(said, "\n"), "new generation")
	}
	for i := 0; i < 300; i++ {
		if entries, err := archive.List(ctx, st); err == nil && len(entries) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The day goes on: every pod updated three times, captured.
	var last int64
	for round := 1; round <= 3; round++ {
		for i := range 20 {
			last = put(fmt.Sprintf("/registry/pods/p%02d", i), fmt.Sprintf("old %d", round))
		}
	}
	first := waitStored(last, "")
	if how == afterTheLastPut {
		// A copy after every put, then 10 pods deleted, captured.
		lastNight = copyNow()
		for i := range 10 {
			for try := 0; ; try++ {
				dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
				resp, err := cli.Delete(dctx, fmt.Sprintf("/registry/pods/p%02d", i))
				dcancel()
				if err == nil {
					last = resp.Header.Revision
					break
				}
				if try == 50 {
					t.Fatalf("delete pod %d: %v", i, err)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		waitStored(last, "")
	}

	// Restored underneath the run: the copy put back, and the cluster goes on at once, past
	// the revisions captured, with other changes.
	outOfSight := how == newKeysOutOfSight || how == afterTheLastPut
	if outOfSight {
		sight.shut()
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m.DataDir, m.DataDir+".before-restore"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(lastNight, m.DataDir); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	if how == writesAfterAWhile {
		for i := 0; i < 300 && !saidWentBack(); i++ {
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Other changes: 60 config maps, then every pod updated once (its second version, where
	// the run captured its fourth). Out of sight, 80 config maps and no pod.
	var now int64
	for i := range 60 {
		now = put(fmt.Sprintf("/registry/configmaps/c%02d", i), "new")
	}
	for i := range 20 {
		if outOfSight {
			now = put(fmt.Sprintf("/registry/configmaps/c%02d", 60+i), "new")
		} else {
			now = put(fmt.Sprintf("/registry/pods/p%02d", i), "new")
		}
	}
	if now <= last {
		t.Fatalf("the restored cluster is at revision %d, not past the %d captured: the test restores nothing", now, last)
	}
	sight.open()
	var p *archive.Point
	var err error
	// A restore to the latest point reaches the cluster's last change (within the test's
	// time: the run's client comes back from its reconnect backoff first).
	for ctx.Err() == nil {
		if p, err = archive.Choose(ctx, st, 0, time.Time{}); err == nil && p.Revision >= now {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopRun()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Fatalf("backup run ended with %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if p.Full.Generation == first || p.Revision < now {
		t.Fatalf("a restore to the latest point goes from backup %s (generation %s) to revision %d; want a backup of a new generation, to revision %d", p.Full.ID, p.Full.Generation, p.Revision, now)
	}
	v, err := archive.VerifyPoint(ctx, st, cli, m.ClientURL, verifyOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if v.Result != "verified" {
		t.Fatalf("the newest point does not restore to the cluster as it is: %s %s", v.Result, v.Why)
	}
	if !saidWentBack() {
		t.Errorf("the run never said it started a new generation:\n%s", strings.Join(said, "\n"))
	}
	t.Logf("the run said:\n%s", strings.Join(said, "\n"))
}

// clientGate forwards TCP connections to a member's client address, and can cut the way:
// shut closes every connection and refuses new ones until open.
type clientGate struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]bool
}

func newClientGate(t *testing.T, targetURL string) *clientGate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &clientGate{ln: ln, target: strings.TrimPrefix(targetURL, "http://"), conns: map[net.Conn]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go g.forward(in)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		g.shut()
	})
	return g
}

func (g *clientGate) url() string { return "http://" + g.ln.Addr().String() }

// forward copies in to the member and back, unless the gate is shut.
func (g *clientGate) forward(in net.Conn) {
	out, err := net.DialTimeout("tcp", g.target, 5*time.Second)
	if err != nil || !g.track(in, out) {
		in.Close()
		if out != nil {
			out.Close()
		}
		return
	}
	go func() { io.Copy(out, in); out.Close() }()
	io.Copy(in, out)
	in.Close()
}

func (g *clientGate) track(conns ...net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	for _, c := range conns {
		g.conns[c] = true
	}
	return true
}

func (g *clientGate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for c := range g.conns {
		c.Close()
	}
	clear(g.conns)
}

func (g *clientGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = false
}
