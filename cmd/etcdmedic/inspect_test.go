package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/finding"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// inspectJSON runs `etcdmedic inspect -w json DIR` and decodes what it printed.
func inspectJSON(t *testing.T, dir string, extra ...string) (int, map[string]any, []finding.Finding) {
	t.Helper()
	code, out, errOut := runCLI(t, append([]string{"inspect", "-w", "json", dir}, extra...)...)
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("inspect -w json printed no JSON (exit %d): %v\nstdout: %s\nstderr: %s", code, err, out, errOut)
	}
	var fs struct {
		Findings []finding.Finding `json:"findings"`
	}
	json.Unmarshal([]byte(out), &fs)
	return code, doc, fs.Findings
}

func hasFinding(fs []finding.Finding, id string, sev finding.Severity) bool {
	for _, f := range fs {
		if f.ID == id && f.Severity == sev && f.Remedy != "" && f.Why != "" && len(f.Evidence) > 0 {
			return true
		}
	}
	return false
}

// The runbook of incident 1, offline: a member removed from its cluster keeps a data dir that
// says so, and a PD join file naming a peer that no longer exists is caught.
func TestInspectRemovedMemberAndStaleJoin(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, Version: etcdtest.Linked})
	m3 := c.Member("m3")

	// A running member's files are locked: inspect says so and reads nothing.
	code, _, errOut := runCLI(t, "inspect", m3.DataDir)
	if code != exitFailed || !strings.Contains(errOut, "locked") || !strings.Contains(errOut, "Hint: stop the member") {
		t.Fatalf("inspect of a running member: exit %d, stderr %q", code, errOut)
	}
	// ...and reads it through a consistent copy when asked to.
	c.Client(t).Put(t.Context(), "k", "v")
	code, doc, fs := inspectJSON(t, m3.DataDir, "--live-endpoint", m3.ClientURL)
	if code != exitOK || len(fs) != 0 || doc["liveCopy"] == nil || doc["identity"].(map[string]any)["name"] != "m3" {
		t.Fatalf("live copy: exit %d findings %+v doc %v", code, fs, doc["identity"])
	}
	if rev := doc["backend"].(map[string]any)["revision"].(float64); rev < 2 {
		t.Errorf("live copy revision %v", rev)
	}
	code, _, errOut = runCLI(t, "inspect", m3.DataDir, "--live-endpoint", c.Member("m1").ClientURL)
	if code != exitFailed || !strings.Contains(errOut, "give the endpoint of the member that runs on this data dir") {
		t.Errorf("live copy through another member: exit %d: %s", code, errOut)
	}

	// m3 leads when it is removed, so that it applies its own removal: a follower can be cut
	// off before it hears that the removal committed (once, under a full test run), and then
	// only its peers' refusals stop it, and nothing on its disk says it was removed.
	c.MoveLeader(t, m3)
	c.RemoveMember(t, m3)
	code, doc, fs = inspectJSON(t, m3.DataDir)
	if code != exitCritical || !hasFinding(fs, finding.IDMemberRemoved, finding.Critical) {
		t.Fatalf("removed member: exit %d, findings %+v", code, fs)
	}
	if id := doc["identity"].(map[string]any); id["removedMarked"] != true || id["name"] != "m3" {
		t.Errorf("identity %v", id)
	}

	// A PD-style data dir: the same member/ layout plus a join file naming a ghost.
	m2 := c.Member("m2")
	if err := m2.Stop(); err != nil {
		t.Fatal(err)
	}
	pd := filepath.Join(t.TempDir(), "pd")
	copyDir(t, m2.DataDir, pd)
	writeFile(t, filepath.Join(pd, "join"), "m1="+c.Member("m1").PeerURL+",pd-4=http://127.0.0.1:1")
	code, doc, fs = inspectJSON(t, pd)
	if code != exitCritical || doc["kind"] != "pd-member" || !hasFinding(fs, finding.IDPDJoinUnknownMember, finding.Critical) {
		t.Fatalf("PD dir: exit %d kind %v findings %+v", code, doc["kind"], fs)
	}
	if len(fs) != 1 || fs[0].Subject != "pd-4" {
		t.Errorf("want only pd-4 flagged, got %+v", fs)
	}

	// A healthy stopped member: no findings, exit 0, and the documented JSON fields.
	code, doc, fs = inspectJSON(t, m2.DataDir)
	if code != exitOK || len(fs) != 0 {
		t.Fatalf("healthy member: exit %d findings %+v", code, fs)
	}
	for _, field := range []string{"path", "kind", "identity", "raft", "backend", "membership", "findings"} {
		if _, ok := doc[field]; !ok {
			t.Errorf("JSON lacks %q", field)
		}
	}
	code, out, _ := runCLI(t, "inspect", m2.DataDir)
	for _, want := range []string{"CLUSTER ID", "HARD STATE", "REVISION", "LEARNER v2", "FINDINGS: none"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("table output lacks %q:\n%s", want, out)
		}
	}
}

// As an unprivileged user, a data dir it may not read gets one clear line, not a crash.
func TestInspectPermissionDeniedAsNobody(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the CLI as nobody")
	}
	bin := etcdtest.EtcdmedicBinary(t)
	base, err := os.MkdirTemp("", "etcdmedic-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	// The binary must be reachable by nobody too.
	exe := filepath.Join(base, "etcdmedic")
	copyFile(t, bin, exe, 0o755)
	private := filepath.Join(base, "private")
	os.MkdirAll(filepath.Join(private, "member", "wal"), 0o700)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "inspect", private)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err == nil || !errorAs(err, &exit) || exit.ExitCode() != exitFailed || !strings.Contains(string(out), "permission denied") {
		t.Fatalf("want exit 3 and permission denied, got %v: %s", err, out)
	}
	if strings.Count(strings.TrimSpace(string(out)), "\n") > 1 {
		t.Errorf("more than an error line and a hint: %s", out)
	}
}
