package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// runCLI runs one etcdmedic command line in-process and returns its exit code and output.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// cliFunc runs one etcdmedic command line: runCLI, or a processCLI's run.
type cliFunc func(t *testing.T, args ...string) (code int, stdout, stderr string)

// processCLI runs etcdmedic command lines as the built binary, each in a process of its own,
// for a test that needs what only a whole process has: its own PATH (a systemctl double) or
// umask. Such a test runs in parallel with the others, which run the CLI in-process.
type processCLI struct {
	path  string // put first on PATH, when set
	umask string // octal, when set
}

func (p processCLI) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	argv := append([]string{etcdtest.EtcdmedicBinary(t)}, args...)
	if p.umask != "" {
		argv = append([]string{"/bin/sh", "-c", "umask " + p.umask + " && exec \"$0\" \"$@\""}, argv...)
	}
	cmd := exec.CommandContext(t.Context(), argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	if p.path != "" {
		cmd.Env = append(cmd.Env, "PATH="+p.path+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run %v: %v", argv, err)
	}
	return code, out.String(), errOut.String()
}

func TestVersionNamesLinkedEtcd(t *testing.T) {
	t.Parallel()
	code, out, _ := runCLI(t, "version", "-w", "json")
	var v versionInfo
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || !strings.HasPrefix(v.LinkedEtcd, "3.7.") {
		t.Fatalf("exit %d, output %q", code, out)
	}
}

// Every bad command line gets one "Error:" line (plus at most a hint) and exit 3.
func TestBadInputGetsOneClearLine(t *testing.T) {
	t.Parallel()
	file := t.TempDir() + "/file"
	writeFile(t, file, "x")
	for _, args := range [][]string{
		{"inspect"},
		{"inspect", "/does/not/exist"},
		{"inspect", file},
		{"inspect", t.TempDir()},
		{"inspect", "-w", "yaml", t.TempDir()},
		{"sandbox", "status", "--dir", t.TempDir()},
		{"sandbox", "stop", "m9", "--dir", t.TempDir()},
		{"drill", "no-such-drill"},
		{"drill", "quorum-loss", "--naive"},
		{"drill", "stale-volume", "--report", "/does/not/exist/report.html"},
	} {
		code, out, errOut := runCLI(t, args...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code != exitFailed || !strings.HasPrefix(lines[0], "Error: ") || len(lines) > 2 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q", args, code, errOut, out)
		}
		if len(lines) == 2 && !strings.HasPrefix(lines[1], "Hint: ") {
			t.Errorf("%v: second line is not a hint: %q", args, lines[1])
		}
	}
}
