package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// An operator's etcdctl habits work against a cluster with auth enabled: --user NAME:PASSWORD,
// --user NAME --password, ETCDCTL_USER, and a bare --user NAME that asks on the terminal.
func TestUserFormsAgainstAuthCluster(t *testing.T) {
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	ep := c.Member("m1").ClientURL
	enableAuth(t, c, "root", "r00t:pw")

	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"--user NAME:PASSWORD, split at the first colon", []string{"--user", "root:r00t:pw"}, nil},
		{"--user NAME --password", []string{"--user", "root", "--password", "r00t:pw"}, nil},
		{"ETCDCTL_USER=NAME:PASSWORD", nil, map[string]string{"ETCDCTL_USER": "root:r00t:pw"}},
		{"--user NAME with ETCDCTL_PASSWORD", []string{"--user", "root"}, map[string]string{"ETCDCTL_PASSWORD": "r00t:pw"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, out, errOut := runCLI(t, append([]string{"doctor", "-w", "json", "--endpoints", ep}, tc.args...)...)
			wantAuthenticated(t, code, out, errOut)
		})
	}

	// A wrong password: one clear line, exit 3, and the password given is not echoed back.
	code, out, errOut := runCLI(t, "doctor", "--endpoints", ep, "--user", "root:wrong-pw", "--command-timeout", "3s")
	if code != exitFailed || !strings.Contains(errOut, "authentication failed") || strings.Contains(errOut+out, "wrong-pw") {
		t.Fatalf("wrong password: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "doctor", "--endpoints", ep, "--password", "r00t:pw"); code != exitFailed || !strings.Contains(errOut, "--password goes with --user") {
		t.Fatalf("--password without --user: exit %d: %s", code, errOut)
	}

	// A bare --user NAME and no terminal (a script, CI): it fails at once, saying what to give.
	bin := etcdtest.EtcdmedicBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "doctor", "--endpoints", ep, "--user", "root")
	cmd.Env = withoutEtcdctl(os.Environ())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != exitFailed || !strings.Contains(stderr.String(), "not a terminal") || !strings.Contains(stderr.String(), "--user NAME:PASSWORD") {
		t.Fatalf("--user root without a terminal: %v\n%s", err, stderr.String())
	}

	// On a terminal it asks, without echo, as etcdctl does.
	code, out, screen := runOnTerminal(t, "r00t:pw\n", bin, "doctor", "-w", "json", "--endpoints", ep, "--user", "root")
	if !strings.Contains(screen, "Password for root: ") || strings.Contains(screen, "r00t") {
		t.Fatalf("the terminal showed %q: want the prompt and no password", screen)
	}
	wantAuthenticated(t, code, out, screen)
}

// enableAuth does what an operator does with etcdctl: user add, grant the root role, auth enable.
func enableAuth(t *testing.T, c *etcdtest.Cluster, user, password string) {
	t.Helper()
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := cli.UserAdd(ctx, user, password); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, user, "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	// Proof that auth is on: the same read without credentials is refused.
	if _, err := cli.Get(ctx, "health"); err == nil {
		t.Fatal("auth is enabled, yet a read without credentials succeeded")
	}
}

// wantAuthenticated asserts that doctor reached every member and read through quorum, which
// an auth-enabled cluster allows only with valid credentials.
func wantAuthenticated(t *testing.T, code int, out, errOut string) {
	t.Helper()
	var res struct {
		Members []struct {
			Name  string `json:"name"`
			Probe *struct {
				Reached   bool   `json:"reached"`
				Healthy   bool   `json:"healthy"`
				HealthErr string `json:"healthError"`
			} `json:"probe"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code == exitFailed || code == exitCritical || len(res.Members) == 0 {
		t.Fatalf("exit %d, %v\nstdout %s\nstderr %s", code, err, out, errOut)
	}
	for _, m := range res.Members {
		if m.Probe == nil || !m.Probe.Reached || !m.Probe.Healthy {
			t.Fatalf("%s not read with the credentials: %+v\nstderr %s", m.Name, m.Probe, errOut)
		}
	}
}

func withoutEtcdctl(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "ETCDCTL_") {
			out = append(out, kv)
		}
	}
	return out
}

// runOnTerminal runs the command with a pseudo-terminal as stdin and stderr (stdout is
// captured apart), types input once the terminal's echo is off, and returns the exit code,
// stdout and what the terminal showed.
func runOnTerminal(t *testing.T, input, name string, args ...string) (int, string, string) {
	t.Helper()
	master, tty := openPTY(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = withoutEtcdctl(os.Environ())
	var stdout bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &stdout, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var screen bytes.Buffer
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1024)
		for {
			n, err := master.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	shown := func() string { mu.Lock(); defer mu.Unlock(); return screen.String() }
	typed := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !strings.Contains(shown(), "Password") {
			continue
		}
		tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		if err == nil && tio.Lflag&unix.ECHO == 0 {
			if _, err := master.WriteString(input); err != nil {
				t.Fatal(err)
			}
			typed = true
			break
		}
	}
	err := cmd.Wait()
	tty.Close()
	master.Close()
	<-done
	if !typed {
		t.Fatalf("no password prompt with the echo off: %v\n%s", err, shown())
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), shown()
}

func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close(); tty.Close() })
	return master, tty
}

// Turning TLS verification off is said once, on stderr, whichever way it was turned off.
func TestTLSVerificationOffWarns(t *testing.T) {
	refused := "https://127.0.0.1:" + fmt.Sprint(freePortsForTest(t, 1)[0])
	count := func(args ...string) int {
		t.Helper()
		_, out, errOut := runCLI(t, args...)
		if strings.Contains(out, "TLS verification is off") {
			t.Errorf("the warning went to stdout: %q", out)
		}
		return strings.Count(errOut, "Warning: TLS verification is off")
	}
	doctorArgs := []string{"doctor", "--endpoints", refused, "--command-timeout", "1s"}
	if n := count(append(doctorArgs, "--insecure-skip-tls-verify")...); n != 1 {
		t.Errorf("--insecure-skip-tls-verify: %d warnings, want 1", n)
	}
	if n := count(doctorArgs...); n != 0 {
		t.Errorf("verification on: %d warnings", n)
	}
	t.Setenv("ETCDCTL_INSECURE_SKIP_TLS_VERIFY", "true")
	if n := count(doctorArgs...); n != 1 {
		t.Errorf("ETCDCTL_INSECURE_SKIP_TLS_VERIFY=true: %d warnings, want 1", n)
	}
	if n := count(append(doctorArgs, "--insecure-skip-tls-verify=false")...); n != 0 {
		t.Errorf("the flag set to false overrides the variable: %d warnings", n)
	}
	if n := count("version"); n != 0 {
		t.Errorf("a command that connects to nothing: %d warnings", n)
	}
	t.Setenv("ETCDCTL_INSECURE_SKIP_TLS_VERIFY", "false")
	if n := count(doctorArgs...); n != 0 {
		t.Errorf("ETCDCTL_INSECURE_SKIP_TLS_VERIFY=false: %d warnings", n)
	}
}
