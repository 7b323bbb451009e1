package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/scan"
)

// A planted link to / and a link to another disk's data dir: scan lists both and follows
// neither, unless told to; it never enters /proc, /sys or /dev, even from /; and /usr/bin
// (whose coreutils `join` once passed for a PD join file) is not a PD data dir.
func TestScanStaysInsideItsRoots(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	m1 := c.Member("m1")
	if err := m1.Stop(); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "root")
	outside := filepath.Join(t.TempDir(), "other-disk")
	copyDir(t, m1.DataDir, filepath.Join(root, "vol-in"))
	copyDir(t, m1.DataDir, filepath.Join(outside, "vol-out"))
	for link, target := range map[string]string{"host": "/", "elsewhere": outside} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}

	started := time.Now()
	code, res, errOut := scanJSON(t, root)
	if took := time.Since(started); took > 5*time.Second {
		t.Errorf("scan took %s: it went outside its root", took)
	}
	if code != exitFailed || !strings.Contains(errOut, "partial") {
		t.Errorf("links not followed: want exit %d and why, got %d: %s", exitFailed, code, errOut)
	}
	if got := foundPaths(res); !slices.Equal(got, []string{filepath.Join(root, "vol-in")}) {
		t.Errorf("found %v, want only vol-in", got)
	}
	wantOutside := []string{filepath.Join(root, "elsewhere") + " -> " + outside, filepath.Join(root, "host") + " -> /"}
	if !slices.Equal(res.Outside, wantOutside) {
		t.Errorf("outside: %v, want %v", res.Outside, wantOutside)
	}

	// Followed on purpose: the other disk's data dir is found, the host is walked (3 levels) but
	// not its kernel filesystems, and no system folder passes for a data dir.
	code, res, errOut = scanJSON(t, root, "--follow-links-outside", "--max-depth", "3")
	if !slices.Contains(foundPaths(res), filepath.Join(root, "elsewhere", "vol-out")) || len(res.Outside) != 0 {
		t.Errorf("--follow-links-outside: exit %d, found %v, outside %v: %s", code, foundPaths(res), res.Outside, errOut)
	}
	for _, p := range foundPaths(res) {
		for _, sys := range []string{"bin", "sbin", "usr", "lib", "etc"} {
			if strings.HasPrefix(p, filepath.Join(root, "host", sys)) {
				t.Errorf("a system folder passed for a data dir: %s", p)
			}
		}
	}
	for _, d := range []string{"proc", "sys", "dev"} {
		if !slices.Contains(res.NotEntered, filepath.Join(root, "host", d)) {
			t.Errorf("/%s through the link: not listed as not entered: %v", d, res.NotEntered)
		}
	}

	_, res, errOut = scanJSON(t, "/", "--max-depth", "1")
	if !slices.Equal(res.NotEntered, []string{"/dev", "/proc", "/sys"}) || len(res.Found) != 0 {
		t.Errorf("scan /: not entered %v, found %v: %s", res.NotEntered, foundPaths(res), errOut)
	}

	// Nothing skipped, nothing outside: exit 0.
	if code, res, errOut := scanJSON(t, filepath.Join(root, "vol-in")); code != 0 || len(res.Found) != 1 {
		t.Errorf("a plain data dir: exit %d, found %v: %s", code, foundPaths(res), errOut)
	}
}

// Run as a user that cannot read part of the tree, scan lists what it skipped and exits 3:
// a data dir it could not look into may be there.
func TestScanExitsNonZeroWhenItCouldNotRead(t *testing.T) {
	t.Parallel()
	other := asSecondUser(t)
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	m1 := c.Member("m1")
	if err := m1.Stop(); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "root")
	copyDir(t, m1.DataDir, filepath.Join(root, "vol-private")) // member/ stays 0700, root's
	if err := os.MkdirAll(filepath.Join(root, "locked", "vol"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{root, filepath.Join(root, "vol-private")} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	openToOthers(t, filepath.Dir(root))

	if code, res, errOut := scanJSON(t, root); code != 0 || len(res.Found) != 1 {
		t.Fatalf("as root: exit %d, found %v, skipped %v: %s", code, foundPaths(res), res.Skipped, errOut)
	}
	code, out, errOut := other.run(t, "scan", root, "-w", "json")
	var res scan.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("as %s: exit %d, no JSON: %v\n%s%s", other.name, code, err, out, errOut)
	}
	if code != exitFailed || !strings.Contains(errOut, "partial") {
		t.Errorf("as %s: exit %d, want %d and why: %s", other.name, code, exitFailed, errOut)
	}
	skipped := strings.Join(res.Skipped, "\n")
	for _, p := range []string{filepath.Join(root, "locked"), filepath.Join(root, "vol-private", "member")} {
		if !strings.Contains(skipped, p+": ") {
			t.Errorf("as %s: %s not listed as skipped: %v", other.name, p, res.Skipped)
		}
	}
}

func scanJSON(t *testing.T, args ...string) (int, scan.Result, string) {
	t.Helper()
	code, out, errOut := runCLI(t, append([]string{"scan", "-w", "json"}, args...)...)
	var res scan.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("scan %v: exit %d, no JSON: %v\n%s", args, code, err, errOut)
	}
	return code, res, errOut
}

func foundPaths(res scan.Result) []string {
	var out []string
	for _, f := range res.Found {
		out = append(out, f.Path)
	}
	return out
}

// secondUser runs the built etcdmedic as nobody: a user that does not own the test's files.
type secondUser struct {
	name     string
	bin      string
	home     string
	uid, gid uint32
}

// asSecondUser skips the test unless it runs as root (only root can run a process as another
// user), and installs a copy of etcdmedic that nobody can run.
func asSecondUser(t *testing.T) *secondUser {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs etcdmedic as a second user (nobody)")
	}
	u := &secondUser{name: "nobody", uid: 65534, gid: 65534}
	if nu, err := user.Lookup("nobody"); err == nil {
		uid, _ := strconv.ParseUint(nu.Uid, 10, 32)
		gid, _ := strconv.ParseUint(nu.Gid, 10, 32)
		u.uid, u.gid = uint32(uid), uint32(gid)
	}
	dir := t.TempDir()
	openToOthers(t, dir)
	u.bin = filepath.Join(dir, "etcdmedic")
	copyFile(t, etcdtest.EtcdmedicBinary(t), u.bin, 0o755)
	u.home = filepath.Join(dir, "home")
	if err := os.Mkdir(u.home, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(u.home, 0o777); err != nil {
		t.Fatal(err)
	}
	return u
}

// run runs etcdmedic as the second user, with HOME and TMPDIR in a folder of its own.
func (u *secondUser) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, u.bin, args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + u.home, "TMPDIR=" + u.home}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: []uint32{}}}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), out.String(), errOut.String()
	} else if err != nil {
		t.Fatalf("run %v as %s: %v", args, u.name, err)
	}
	return 0, out.String(), errOut.String()
}

// openToOthers lets other users through dir and its parents up to the temp dir (t.TempDir
// makes them 0700).
func openToOthers(t *testing.T, dir string) {
	t.Helper()
	for p := dir; p != filepath.Clean(os.TempDir()) && p != "/"; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, st.Mode().Perm()|0o055); err != nil {
			t.Fatal(err)
		}
	}
}
