package crashfs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

const (
	// serveEnv makes the re-executed test binary a crash filesystem server (see TestMain).
	serveEnv = "CRASHFS_TEST_SERVE"
	// mmapEnv makes the re-executed test binary run the mmap test's parent side in the dir
	// it names.
	mmapEnv = "CRASHFS_TEST_MMAP_DIR"
)

// TestMain makes the test binary the server command when serveEnv is set: Start appends the
// backing dir and the mountpoint to its arguments.
func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) != "" {
		n := len(os.Args)
		if n < 3 {
			fmt.Fprintln(os.Stderr, "usage: crashfs.test BACKING MOUNTPOINT")
			os.Exit(2)
		}
		if err := Serve(os.Args[n-2], os.Args[n-1], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(etcdtest.Main(m, etcdtest.Needs{Servers: []string{etcdtest.V3_6}}))
}

// startForTest serves a crash filesystem over backing at mnt from a child process, skips the
// test where FUSE cannot be used, and makes sure, when the test ends, that neither the child
// nor the mount is left.
func startForTest(t *testing.T, backing, mnt string) *Process {
	t.Helper()
	p, err := Start([]string{os.Args[0]}, backing, mnt, serveEnv+"=1")
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Unmount(); err != nil {
			t.Errorf("unmount at the end of the test: %v", err)
			if _, err := p.Cut(CutOptions{}); err != nil {
				t.Errorf("forced unmount: %v", err)
			}
		}
		wantServerGone(t, p)
	})
	return p
}

// wantServerGone fails the test if p's server still runs or its mount is still there.
func wantServerGone(t *testing.T, p *Process) {
	t.Helper()
	select {
	case <-p.exited:
	default:
		t.Errorf("the server (pid %d) still runs", p.cmd.Process.Pid)
		_ = p.stop()
	}
	if mounted(p.mountpoint) {
		t.Errorf("%s is still mounted", p.mountpoint)
		_ = unix.Unmount(p.mountpoint, unix.MNT_DETACH)
	}
}

// Through a mount served by another process, a cut keeps what was synced and drops the rest.
func TestProcessCutKeepsSyncedDataAndDropsUnsynced(t *testing.T) {
	backing, mnt := t.TempDir(), filepath.Join(t.TempDir(), "mnt")
	p := startForTest(t, backing, mnt)
	writeSynced(t, filepath.Join(mnt, "synced"), "durable")
	fsync(t, mnt)
	writeFile(t, filepath.Join(mnt, "unsynced"), "lost")
	if got, err := p.Unsynced(); err != nil || got.Files != 1 || got.Bytes != 4 || got.Entries != 1 {
		t.Errorf("Unsynced() = %+v, %v; want 1 file, 4 bytes, 1 entry", got, err)
	}
	report, err := p.Cut(CutOptions{})
	if err != nil {
		t.Fatalf("cut: %v", err)
	}
	t.Log(report)
	if report.BytesDropped != 4 || len(report.Files) != 1 || report.Files[0].Path != "unsynced" {
		t.Errorf("report %s, files %+v; want 4 bytes of unsynced dropped", report, report.Files)
	}
	wantServerGone(t, p)

	startForTest(t, backing, mnt)
	wantContent(t, filepath.Join(mnt, "synced"), "durable")
	wantContent(t, filepath.Join(mnt, "unsynced"), "<missing>")
}

// The random source of a torn cut reaches the server as a seed: the same source tears the
// same write the same way.
func TestProcessTornWriteWithASeed(t *testing.T) {
	var kept []int
	for range 2 {
		backing, mnt := t.TempDir(), filepath.Join(t.TempDir(), "mnt")
		p := startForTest(t, backing, mnt)
		path := filepath.Join(mnt, "db")
		writeSynced(t, path, strings.Repeat("o", 6*pageSize))
		fsync(t, mnt)
		file, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := file.WriteAt(bytes.Repeat([]byte("t"), 4*pageSize), 0); err != nil {
			t.Fatal(err)
		}
		file.Close()
		report, err := p.Cut(CutOptions{Tear: true, Rand: rand.New(rand.NewPCG(1, 2))})
		if err != nil {
			t.Fatalf("cut: %v", err)
		}
		if report.Torn == nil {
			t.Fatalf("report %s names no torn write", report)
		}
		t.Log(report)
		k := report.Torn.Kept
		if k%pageSize != 0 || k < pageSize || k > 3*pageSize || report.Torn.Path != "db" {
			t.Errorf("tore %+v, want 1 to 3 whole pages of db kept", *report.Torn)
		}
		want := strings.Repeat("t", k) + strings.Repeat("o", 6*pageSize-k)
		if got := contentOf(t, filepath.Join(backing, "db")); got != want {
			t.Errorf("db after the tear = %q, want %d pages kept", abbreviate(got), k/pageSize)
		}
		kept = append(kept, k)
	}
	if kept[0] != kept[1] {
		t.Errorf("the same seed kept %d and then %d bytes", kept[0], kept[1])
	}
}

// A clean unmount through the server keeps everything, synced or not.
func TestProcessUnmountKeepsEverything(t *testing.T) {
	backing, mnt := t.TempDir(), filepath.Join(t.TempDir(), "mnt")
	p := startForTest(t, backing, mnt)
	writeFile(t, filepath.Join(mnt, "never-synced"), "kept")
	if err := p.Unmount(); err != nil {
		t.Fatal(err)
	}
	wantServerGone(t, p)
	wantContent(t, filepath.Join(backing, "never-synced"), "kept")
	if err := p.Unmount(); err != nil {
		t.Errorf("second Unmount: %v", err)
	}
}

// A mount that fails in the server fails Start, and leaves no server behind.
func TestStartReportsTheServersMountError(t *testing.T) {
	backing := t.TempDir()
	p, err := Start([]string{os.Args[0]}, backing, filepath.Join(backing, "mnt"), serveEnv+"=1")
	if err == nil {
		p.Unmount()
		t.Fatal("Start with the mountpoint inside its backing dir succeeded")
	}
	if errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "must not contain each other") {
		t.Errorf("Start: %v, want the server's refusal", err)
	}
	r := reply{Error: "crash filesystem unavailable: no /dev/fuse", Unavailable: true}
	if !errors.Is(r.err(), ErrUnavailable) {
		t.Errorf("a reply marked unavailable: %v does not wrap ErrUnavailable", r.err())
	}
}

// The regression: etcdmedic mmaps bbolt files on a crash filesystem it started. A page fault
// on a FUSE mapping blocks its thread outside any Go safe point; with the server in the same
// process, a GC then stops the server's goroutines too and nobody answers. The parent side
// runs in a child test process, so that a deadlock (which stops every timer in the process)
// is bounded from outside it.
func TestParentMmapsAFileOnTheMountWhileCollectingGarbage(t *testing.T) {
	if dir := os.Getenv(mmapEnv); dir != "" {
		mmapWhileCollecting(t, dir)
		return
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	cmd := exec.Command(os.Args[0], "-test.run=^TestParentMmapsAFileOnTheMountWhileCollectingGarbage$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), mmapEnv+"="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("parent process: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Error("the parent process hung reading an mmapped file on the mount: killed after 60s")
		// A thread waiting on a FUSE request ignores SIGKILL until the connection goes.
		if err := abortConnection(mnt); err != nil {
			t.Error(err)
		}
		_ = cmd.Process.Kill()
		<-exited
	}
	t.Logf("parent process:\n%s", out.String())
	if bytes.Contains(out.Bytes(), []byte("--- SKIP")) {
		t.Skip("FUSE unavailable in the parent process")
	}
	// A killed parent closes the server's control pipe: the server unmounts and exits.
	deadline := time.Now().Add(2 * leaveTimeout)
	for mounted(mnt) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if mounted(mnt) {
		t.Errorf("%s still mounted after the parent process ended", mnt)
		_ = unix.Unmount(mnt, unix.MNT_DETACH)
	}
}

// mmapWhileCollecting is the parent side: it serves a mount from a child process, then maps
// and reads a file on it over and over, each time through a new open (which drops the page
// cache, so every page faults into the FUSE server), while other goroutines force GCs.
func mmapWhileCollecting(t *testing.T, dir string) {
	backing, mnt := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(backing, 0o700); err != nil {
		t.Fatal(err)
	}
	startForTest(t, backing, mnt)
	const pages = 64
	path := filepath.Join(mnt, "db")
	content := bytes.Repeat([]byte("0123456789abcdef"), pages*pageSize/16)
	writeSynced(t, path, string(content))

	stop := make(chan struct{})
	var gcs sync.WaitGroup
	for range 2 {
		gcs.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					runtime.GC()
				}
			}
		})
	}
	rounds := 0
	for start := time.Now(); time.Since(start) < 3*time.Second; rounds++ {
		readMapped(t, path, content)
	}
	close(stop)
	gcs.Wait()
	var stats runtime.MemStats
	runtime.ReadMemStats(&stats)
	t.Logf("%d rounds of %d page faults each, %d GCs", rounds, pages, stats.NumGC)
}

// readMapped opens path, drops its cached pages, maps it and checks every page.
func readMapped(t *testing.T, path string, want []byte) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, len(want), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	for off := 0; off < len(want); off += pageSize {
		if data[off] != want[off] {
			t.Fatalf("byte %d of the mapping = %q, want %q", off, data[off], want[off])
		}
	}
}

// A server killed with SIGKILL leaves a dead mount; the Process detaches it.
func TestKilledServerLeavesNoMount(t *testing.T) {
	backing, mnt := t.TempDir(), filepath.Join(t.TempDir(), "mnt")
	p := startForTest(t, backing, mnt)
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	if !mounted(mnt) {
		t.Fatal("no dead mount after the kill: nothing left to test")
	}
	if err := p.Unmount(); err == nil {
		t.Error("Unmount of a killed server succeeded, want an error")
	} else {
		t.Log(err)
	}
	if mounted(mnt) {
		t.Errorf("%s still mounted after Unmount", mnt)
	}
	if _, err := os.ReadDir(mnt); err != nil {
		t.Errorf("mountpoint after the cleanup: %v", err)
	}
}

// EOF on control means the parent died: the server unmounts, keeping everything, and returns.
// Serve runs in this process here, to read its replies line by line.
func TestServeUnmountsWhenControlCloses(t *testing.T) {
	backing, mnt := t.TempDir(), filepath.Join(t.TempDir(), "mnt")
	control, commands := io.Pipe()
	replies, out := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- Serve(backing, mnt, control, out)
		out.Close()
	}()
	lines := bufio.NewScanner(replies)
	next := func() reply {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("no reply: %v", <-served)
		}
		var r reply
		if err := json.Unmarshal(lines.Bytes(), &r); err != nil {
			t.Fatalf("reply %q: %v", lines.Text(), err)
		}
		return r
	}
	if r := next(); !r.Ready {
		if errors.Is(r.err(), ErrUnavailable) {
			t.Skip(r.err())
		}
		t.Fatalf("first reply %+v, want ready", r)
	}
	t.Cleanup(func() {
		if mounted(mnt) {
			t.Errorf("%s still mounted at the end of the test", mnt)
			_ = unix.Unmount(mnt, unix.MNT_DETACH)
		}
	})
	writeFile(t, filepath.Join(mnt, "never-synced"), "kept")
	fmt.Fprintln(commands, "reboot")
	if r := next(); !strings.Contains(r.Error, "unknown") {
		t.Errorf("reply to an unknown command: %+v, want an error", r)
	}
	fmt.Fprintln(commands, "unsynced")
	if r := next(); r.Pending == nil || r.Pending.Files != 1 {
		t.Errorf("reply to unsynced: %+v, want 1 file pending", r)
	}
	commands.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after EOF: %v", err)
		}
	case <-time.After(2 * leaveTimeout):
		t.Fatal("Serve still runs after EOF on control")
	}
	if mounted(mnt) {
		t.Errorf("%s still mounted after EOF on control", mnt)
	}
	wantContent(t, filepath.Join(backing, "never-synced"), "kept")
	if _, err := os.Stat(filepath.Join(backing, stashName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stash after a clean unmount: %v", err)
	}
}
