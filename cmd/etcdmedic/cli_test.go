package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// runCLI runs one etcdmedic command line in-process and returns its exit code and output.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
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
