package recovery

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/runlock"
)

// Review finding 2: Apply released its run locks before its background backup had finished
// writing, so a second apply could take them and remove the first one's copy mid-write. Now
// the locks stay held until the background copy has ended, and the copy, its context
// cancelled when Apply returns, stops instead of copying on.
func TestRunLocksOutliveTheBackgroundCopy(t *testing.T) {
	p := &Plan{Survivor: "m1", BackupDir: t.TempDir()}
	for _, name := range []string{"m1", "m2"} {
		p.Members = append(p.Members, PlanMember{Name: name, DataDir: fakeMemberDir(t, name)})
	}
	planDir := t.TempDir()
	began, goOn := make(chan struct{}), make(chan struct{})
	a := &Applier{Plan: p, Dir: planDir, Out: &syncWriter{w: &bytes.Buffer{}}, Timeout: time.Millisecond, survivorLoaded: newGate(),
		beforeBackgroundCopy: func(PlanMember) { close(began); <-goOn }}
	ctx, finish, err := a.exclusive(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.backupFirst(ctx); err != nil {
		t.Fatal(err)
	}
	<-began // m2's copy is under way, held here
	finished := make(chan struct{})
	go func() { finish(); close(finished) }()
	time.Sleep(200 * time.Millisecond) // finish has cancelled and waits for the copy
	for _, dir := range []string{planDir, p.Members[1].DataDir} {
		if l, err := runlock.Acquire(dir, "a second apply"); err == nil {
			l.Release()
			t.Fatalf("%s could be locked while the first run's background copy still ran", dir)
		} else if held := (*runlock.HeldError)(nil); !errors.As(err, &held) {
			t.Fatalf("lock %s: %v", dir, err)
		}
	}
	select {
	case <-finished:
		t.Fatal("finish returned while the background copy still ran")
	default:
	}
	close(goOn)
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("finish did not return once the copy could go on")
	}
	l, err := runlock.Acquire(planDir, "a second apply")
	if err != nil {
		t.Fatalf("the locks are still held after finish: %v", err)
	}
	l.Release()
	// The copy saw the cancellation and stopped: no backup of m2 stands, and its partial copy
	// is the next run's to throw away.
	if _, err := os.Stat(filepath.Join(p.BackupDir, "m2")); err == nil {
		t.Error("m2's backup was finished after Apply was stopped")
	}
	if err := <-a.background["m2"]; !errors.Is(err, context.Canceled) {
		t.Errorf("m2's background copy: %v, want it stopped by the cancellation", err)
	}
}
