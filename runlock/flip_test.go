package runlock

import (
	"os"
	"path/filepath"
	"testing"
)

// Review finding 6: a data dir whose parent did not exist yet was locked in the fallback
// folder; once the parent existed (the first run, or the etcd it started, created it), a
// second run locked beside it, and both held "the" lock. Every run now takes the fallback
// file too, so the second is refused whichever way writability went.
func TestTheLockDoesNotDependOnWhetherTheParentIsWritable(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	target := filepath.Join(t.TempDir(), "new", "etcd")
	first, err := Acquire(target, "member add")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(target, 0o700); err != nil { // what the first run's join does
		t.Fatal(err)
	}
	if second, err := Acquire(target, "member add"); err == nil {
		second.Release()
		t.Fatalf("two runs hold the lock on %s at once: %s and %s", target, first.LockFile, second.LockFile)
	} else if mustBeHeld(t, err).Purpose != "member add" {
		t.Fatalf("the refusal names %+v", err)
	}
	first.Release()

	// The other way round: the first run found the parent writable, the second finds it
	// read-only (another user, a remount).
	lk := defaultLocker()
	first, err = lk.acquire(target, "guard --fix")
	if err != nil {
		t.Fatal(err)
	}
	lk.writable = func(string) bool { return false }
	if second, err := lk.acquire(target, "guard --fix"); err == nil {
		second.Release()
		t.Fatalf("two runs hold the lock on %s at once: %s and %s", target, first.LockFile, second.LockFile)
	}
	first.Release()
	again, err := lk.acquire(target, "free again")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again.Release()
}
