package runlock

import (
	"os"
	"path/filepath"
	"strings"
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

// Review finding 11: when the kernel's list of flocks names no holder (a holder in another
// pid namespace shows as pid 0, and is skipped), the pid the lock file names was given as the
// holder's: on the host it may be any process. It is given as reported, not verified, with
// where to look.
func TestAHolderTheKernelDoesNotNameIsNotVerified(t *testing.T) {
	dir := dataDir(t)
	held := mustAcquire(t, dir, "guard --fix")
	defer held.Release()
	lk := defaultLocker()
	lk.procLocks = filepath.Join(t.TempDir(), "locks")
	// A holder in another pid namespace: /proc/locks shows it with pid 0 only.
	if err := os.WriteFile(lk.procLocks, []byte("1: FLOCK  ADVISORY  WRITE 0 00:00:0 0 EOF\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := lk.acquire(dir, "guard")
	e := mustBeHeld(t, err)
	if !e.Unverified || !strings.Contains(err.Error(), "not verified") || !strings.Contains(err.Error(), "fuser -v "+held.LockFile) {
		t.Fatalf("%+v: %v", e, err)
	}
}
