package runlock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary, started again, a second etcdmedic run holding a lock.
const helperEnv = "RUNLOCK_HELPER_TARGET"

// TestHelperProcess is not a test: started by holdInChild, it takes the lock on the target in
// $RUNLOCK_HELPER_TARGET, says "locked", and holds it until killed or its stdin closes.
func TestHelperProcess(t *testing.T) {
	target := os.Getenv(helperEnv)
	if target == "" {
		t.Skip("helper process only")
	}
	l, err := Acquire(target, "helper holds it")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	bufio.NewReader(os.Stdin).ReadString('\n')
	l.Release()
	os.Exit(0)
}

// holdInChild starts another process holding the lock on target, and kills it when the test ends.
func holdInChild(t *testing.T, target string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+target)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		t.Fatalf("helper did not take the lock: %q %v", line, err)
	}
	return cmd
}

func mustAcquire(t *testing.T, target, purpose string) *Lock {
	t.Helper()
	l, err := Acquire(target, purpose)
	if err != nil {
		t.Fatalf("acquire %s: %v", target, err)
	}
	t.Cleanup(func() { l.Release() })
	return l
}

func mustBeHeld(t *testing.T, err error) *HeldError {
	t.Helper()
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("want a *HeldError, got %v", err)
	}
	return held
}

func dataDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "etcd")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLockFileBesideTargetNamesHolder(t *testing.T) {
	dir := dataDir(t)
	l := mustAcquire(t, dir, "guard --fix")
	if l.LockFile != dir+Suffix {
		t.Fatalf("lock file %s, want it beside the data dir: %s", l.LockFile, dir+Suffix)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the data dir must stay clean, holds %v", entries)
	}
	st, err := os.Stat(l.LockFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v, mode %v", err, st.Mode())
	}
	b, _ := os.ReadFile(l.LockFile)
	for _, want := range []string{`"pid":` + strconv.Itoa(os.Getpid()), `"purpose":"guard --fix"`, `"since":`, `"command":`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("lock file %q does not hold %s", b, want)
		}
	}
	if strings.Count(string(b), "\n") != 1 {
		t.Errorf("want one JSON line, got %q", b)
	}
}

// flock locks an open file description: a second Acquire in the same process conflicts too.
func TestSecondAcquireRefusedNamingHolder(t *testing.T) {
	dir := dataDir(t)
	mustAcquire(t, dir, "recover apply")
	_, err := Acquire(dir, "guard --fix")
	held := mustBeHeld(t, err)
	if held.PID != os.Getpid() || held.Purpose != "recover apply" || held.Command == "" || held.Since.IsZero() || held.Target != dir {
		t.Fatalf("holder not described: %+v", held)
	}
	msg := err.Error()
	for _, want := range []string{dir + " is in use by another etcdmedic run (pid " + strconv.Itoa(os.Getpid()) + ": ", ", since ", "nothing was changed"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}

func TestReleaseLetsTheNextRunIn(t *testing.T) {
	dir := dataDir(t)
	l := mustAcquire(t, dir, "first")
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("a second Release: %v", err)
	}
	if _, err := os.Stat(l.LockFile); err != nil {
		t.Fatalf("the lock file must stay after release: %v", err)
	}
	l2 := mustAcquire(t, dir, "second")
	if b, _ := os.ReadFile(l2.LockFile); !strings.Contains(string(b), `"purpose":"second"`) || strings.Contains(string(b), "first") {
		t.Fatalf("lock file not rewritten for the new holder: %q", b)
	}
}

func TestSymlinkAndRealPathShareOneLock(t *testing.T) {
	dir := dataDir(t)
	link := filepath.Join(t.TempDir(), "etcd-link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, link, "via the link")
	_, err := Acquire(dir, "via the real path")
	if held := mustBeHeld(t, err); held.Purpose != "via the link" {
		t.Fatalf("%+v", held)
	}
	// A target that does not exist yet, under a symlinked parent, resolves through the parent.
	missing := filepath.Join(link, "member-new")
	mustAcquire(t, missing, "new")
	_, err = Acquire(filepath.Join(dir, "member-new"), "new again")
	mustBeHeld(t, err)
}

func TestLockHeldByAnotherProcess(t *testing.T) {
	dir := dataDir(t)
	child := holdInChild(t, dir)
	_, err := Acquire(dir, "guard --fix")
	held := mustBeHeld(t, err)
	if held.PID != child.Process.Pid || held.Purpose != "helper holds it" || !strings.Contains(held.Command, "TestHelperProcess") {
		t.Fatalf("want the child (pid %d) named, got %+v", child.Process.Pid, held)
	}
	if !strings.Contains(err.Error(), "pid "+strconv.Itoa(child.Process.Pid)) {
		t.Fatalf("message does not name the child: %v", err)
	}
}

// A run killed with SIGKILL leaves its lock file, but the kernel dropped its flock.
func TestLockOfKilledRunIsFree(t *testing.T) {
	dir := dataDir(t)
	child := holdInChild(t, dir)
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	l := mustAcquire(t, dir, "after the kill")
	if b, _ := os.ReadFile(l.LockFile); !strings.Contains(string(b), "after the kill") {
		t.Fatalf("%q", b)
	}
}

// The holder locks before it writes: a refused run may find the file empty, or still naming an
// earlier run. The kernel's flock list decides then.
func TestHolderFromProcLocksWhenContentTornOrStale(t *testing.T) {
	if _, err := os.Stat("/proc/locks"); err != nil {
		t.Skip("no /proc/locks")
	}
	dir := dataDir(t)
	child := holdInChild(t, dir)
	for name, content := range map[string]string{
		"empty": "",
		"torn":  `{"pid":` + strconv.Itoa(child.Process.Pid) + `,"comm`,
		"stale": `{"pid":999999999,"command":"etcdmedic upgrade apply /old","purpose":"old run","since":"2020-01-01T00:00:00Z"}` + "\n",
	} {
		if err := os.WriteFile(dir+Suffix, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Acquire(dir, "guard --fix")
		held := mustBeHeld(t, err)
		if held.PID != child.Process.Pid || held.Command != "" || held.Purpose != "" {
			t.Errorf("%s content: want pid %d only, got %+v", name, child.Process.Pid, held)
		}
		if !strings.Contains(err.Error(), "(pid "+strconv.Itoa(child.Process.Pid)+")") {
			t.Errorf("%s content: %v", name, err)
		}
	}
}

func TestHolderUnknownSaysWhereToLook(t *testing.T) {
	dir := dataDir(t)
	mustAcquire(t, dir, "x")
	os.WriteFile(dir+Suffix, nil, 0o600)
	lk := defaultLocker()
	lk.procLocks = filepath.Join(t.TempDir(), "no-proc-locks")
	_, err := lk.acquire(dir, "y")
	if held := mustBeHeld(t, err); held.PID != 0 || !strings.Contains(err.Error(), "fuser -v "+dir+Suffix) {
		t.Fatalf("%+v: %v", held, err)
	}
}

func TestSinceShowsDateWhenNotToday(t *testing.T) {
	at := time.Date(2026, 12, 2, 14, 5, 0, 0, time.Local)
	e := &HeldError{Target: "/p", PID: 7, Command: "etcdmedic recover apply /p --yes", at: at}
	e.Since = time.Date(2026, 12, 2, 14, 3, 7, 0, time.Local)
	if want := "/p is in use by another etcdmedic run (pid 7: etcdmedic recover apply /p --yes, since 14:03:07): wait for it to finish, or stop it; nothing was changed"; e.Error() != want {
		t.Fatalf("got  %s\nwant %s", e.Error(), want)
	}
	e.Since = time.Date(2026, 12, 1, 23, 0, 0, 0, time.Local)
	if !strings.Contains(e.Error(), "since 2026-12-01 23:00:00") {
		t.Fatal(e.Error())
	}
}

func TestAcquireAllInOrderAllOrNothing(t *testing.T) {
	plan, a, b := dataDir(t), dataDir(t), dataDir(t)
	link := filepath.Join(t.TempDir(), "a-link")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	// The same dir twice (once through a link) is locked once, not refused by itself.
	release, err := AcquireAll([]string{plan, b, link, a}, "upgrade apply")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{plan, a, b} {
		if _, err := Acquire(d, "other"); mustBeHeld(t, err).Purpose != "upgrade apply" {
			t.Fatalf("%s not held", d)
		}
	}
	release()
	// One held elsewhere: refused, and the others are released again.
	l := mustAcquire(t, b, "another run")
	_, err = AcquireAll([]string{plan, a, b}, "upgrade apply")
	if held := mustBeHeld(t, err); held.Purpose != "another run" {
		t.Fatalf("%+v", held)
	}
	for _, d := range []string{plan, a} {
		mustAcquire(t, d, "free again").Release()
	}
	l.Release()
}

func TestLockFileLocation(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	resolved := "/var/lib/etcd"
	if got, fallback := lockFileFor(resolved, func(string) bool { return true }); got != "/var/lib/etcd.etcdmedic.lock" || fallback {
		t.Fatalf("writable parent: %s", got)
	}
	var asked string
	got, fallback := lockFileFor(resolved, func(dir string) bool { asked = dir; return false })
	if asked != "/var/lib" || !fallback || filepath.Dir(got) != filepath.Join(os.TempDir(), "etcdmedic-locks") || !strings.HasSuffix(got, ".lock") {
		t.Fatalf("read-only parent: asked %s, got %s", asked, got)
	}
	if other, _ := lockFileFor("/var/lib/etcd2", func(string) bool { return false }); other == got {
		t.Fatal("two targets share a fallback lock file")
	}

	// A run that finds the parent read-only locks in a private folder under the temp dir.
	dir := dataDir(t)
	lk := defaultLocker()
	lk.writable = func(string) bool { return false }
	l, err := lk.acquire(dir, "read-only parent")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	st, err := os.Stat(filepath.Dir(l.LockFile))
	if err != nil || st.Mode().Perm() != 0o700 || filepath.Dir(l.LockFile) != filepath.Join(os.TempDir(), "etcdmedic-locks") {
		t.Fatalf("fallback folder %s: %v %v", filepath.Dir(l.LockFile), err, st.Mode())
	}
	if _, err := lk.acquire(dir, "again"); mustBeHeld(t, err).Purpose != "read-only parent" {
		t.Fatal(err)
	}
	// A fallback folder others can write into is refused, not used.
	os.Chmod(filepath.Dir(l.LockFile), 0o777)
	if _, err := lk.acquire(dataDir(t), "x"); err == nil || !strings.Contains(err.Error(), "not a private folder") {
		t.Fatalf("want refused, got %v", err)
	}
}

// A symlink planted where the lock file goes is not followed (a root run would truncate its target).
func TestLockFileSymlinkNotFollowed(t *testing.T) {
	dir := dataDir(t)
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep me"), 0o600)
	if err := os.Symlink(victim, dir+Suffix); err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(dir, "x"); err == nil {
		t.Fatal("locked through a symlink")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me" {
		t.Fatalf("victim changed: %q", b)
	}
}
