package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/guard"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/recovery"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// quorumLost reproduces incident 2 on a real 3-member cluster under write load: one member is
// wiped, a second is lost. It returns the cluster and the acknowledged writes.
func quorumLost(t *testing.T) (*etcdtest.Cluster, *etcdtest.Ledger) {
	t.Helper()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	for _, m := range c.Members() {
		killLocalMember(t, m.DataDir) // recovery restarts members as detached local processes
	}
	ledger := etcdtest.StartLoad(t.Context(), t, c.Client(t), etcdtest.LoadSpec{Rate: 80})
	waitAcked(t, ledger, 40)
	m3 := c.Member("m3")
	m3.Kill()
	if err := os.RemoveAll(m3.DataDir); err != nil { // the operator wiped it (incident 2)
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	c.Member("m2").Kill()
	time.Sleep(300 * time.Millisecond)
	ledger.Stop()
	return c, ledger
}

func recoverPlanArgs(t *testing.T, c *etcdtest.Cluster, planDir, backups string) []string {
	var eps []string
	for _, m := range c.Members() {
		eps = append(eps, m.ClientURL) // the dead ones too: recovery must cope
	}
	args := []string{"recover", "plan", "--plan-dir", planDir, "--backup-dir", backups, "--endpoints", strings.Join(eps, ","),
		"--command-timeout", "2s", "--etcd-command", etcdmedicEtcd(t)}
	for _, m := range c.Members() {
		args = append(args, "--data-dir", m.Name+"="+m.DataDir)
	}
	return args
}

// checkRecovered asserts the runbook's end state: three healthy voters, no acknowledged write
// lost, every backup and quarantine matching its checksums.
func checkRecovered(t *testing.T, c *etcdtest.Cluster, ledger *etcdtest.Ledger, planDir string) {
	t.Helper()
	// The harness no longer runs these members: recovery restarted them as its own processes.
	var eps []string
	for _, m := range c.Members() {
		eps = append(eps, m.ClientURL)
	}
	code, d := waitDoctor(t, eps, func(d doctorJSON) bool { return d.Quorum.VotersUp == 3 && len(d.Findings) == 0 })
	if code != exitOK {
		t.Fatalf("doctor after recovery: exit %d %s", code, d.ids())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	missing, err := etcdtest.MissingWrites(ctx, cli, ledger.Acked())
	if err != nil || len(missing) != 0 || len(ledger.Acked()) == 0 {
		t.Fatalf("%d of %d acknowledged writes lost (err %v)", len(missing), len(ledger.Acked()), err)
	}
	p, err := recovery.LoadPlan(planDir)
	if err != nil {
		t.Fatal(err)
	}
	if err = recovery.VerifyBackups(p); err != nil {
		t.Fatalf("backups: %v", err)
	}
	for _, m := range p.Members {
		// The survivor's first run alone had a 100 ms election timeout: restart-clean gave it
		// back its own settings before anyone rejoined.
		if _, args, ok := local.FindProcess(m.DataDir); ok && slices.Contains(args, "--election-timeout=100") {
			t.Errorf("%s still runs with its first run's settings: %v", m.Name, args)
		}
		qs, _ := filepath.Glob(m.DataDir + ".etcdmedic-quarantine/*")
		for _, q := range qs {
			if err := guard.Verify(q); err != nil {
				t.Errorf("quarantine %s: %v", q, err)
			}
		}
	}
	t.Logf("recovered with all %d acknowledged writes", len(ledger.Acked()))
}

func TestRecoverQuorumLoss(t *testing.T) {
	t.Parallel()
	c, ledger := quorumLost(t)
	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")

	code, out, errOut := runCLI(t, append(recoverPlanArgs(t, c, planDir, backups), "-w", "json")...)
	if code != exitOK {
		t.Fatalf("recover plan: exit %d\n%s\n%s", code, out, errOut)
	}
	var pr recoverPlanResult
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatal(err)
	}
	if pr.Plan.Survivor != "m1" && pr.Plan.Survivor != "m2" {
		t.Fatalf("survivor %s: m3 was wiped", pr.Plan.Survivor)
	}
	for _, cand := range pr.Plan.Assessment.Candidates {
		if cand.Name == "m3" && cand.Rejected == "" {
			t.Errorf("the wiped m3 must be rejected as a survivor: %+v", cand)
		}
	}
	// Without --yes, apply only shows the plan.
	if code, _, errOut := runCLI(t, "recover", "apply", planDir); code != exitFailed || !strings.Contains(errOut, "--yes") {
		t.Fatalf("apply without --yes: exit %d %s", code, errOut)
	}
	code, out, errOut = runCLI(t, "recover", "apply", planDir, "--yes")
	if code != exitOK {
		t.Fatalf("recover apply: exit %d\n%s\n%s", code, out, errOut)
	}
	checkRecovered(t, c, ledger, planDir)
	// Applying a finished plan again changes nothing.
	if code, _, errOut := runCLI(t, "recover", "apply", planDir, "--yes"); code != exitOK || !strings.Contains(errOut, "skipping") {
		t.Fatalf("re-apply: exit %d %s", code, errOut)
	}
}

// The recovery survives its own interruption: the etcdmedic process is killed (SIGKILL) at
// every step boundary, inside the backup, and inside the survivor's rebuild (where a background
// backup finishes its copy); twice the machine "reboots" too (every etcd killed). Each rerun
// takes it one step further.
func TestRecoverResumesAfterBeingKilledAnywhere(t *testing.T) {
	t.Parallel()
	c, ledger := quorumLost(t)
	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	// m1 still runs: plan stops it and copies the survivor while it watches for a supervisor.
	// Killed right after that copy, it leaves no plan and a partial copy the next plan replaces.
	crashed := exec.CommandContext(t.Context(), etcdtest.EtcdmedicBinary(t), recoverPlanArgs(t, c, planDir, backups)...)
	crashed.Env = append(os.Environ(), plan.CrashpointEnv+"=plan:backup:copied")
	if out, err := crashed.CombinedOutput(); err == nil {
		t.Fatalf("plan with a crash after the survivor's copy finished without crashing:\n%s", out)
	} else if ee, ok := err.(*exec.ExitError); !ok || ee.ProcessState.ExitCode() != -1 {
		t.Fatalf("plan with a crash after the survivor's copy failed otherwise (%v):\n%s", err, lastLines(string(out), 15))
	}
	if _, err := os.Stat(filepath.Join(planDir, plan.File)); err == nil {
		t.Fatal("plan killed before it finished saved a plan")
	}
	if partial, _ := filepath.Glob(filepath.Join(backups, "*.partial")); len(partial) != 1 {
		t.Fatalf("plan killed inside the survivor's copy: want its partial copy, found %v", partial)
	}
	// m1 stays stopped: this plan watches nothing, and apply takes the survivor's backup.
	if code, out, errOut := runCLI(t, recoverPlanArgs(t, c, planDir, backups)...); code != exitOK {
		t.Fatalf("recover plan: exit %d\n%s\n%s", code, out, errOut)
	}
	p, err := recovery.LoadPlan(planDir)
	if err != nil {
		t.Fatal(err)
	}
	// The survivor is copied inside the backup step; the others in the background once the
	// survivor has loaded its data (that crash lands in the middle of force-new-cluster).
	other := ""
	for _, m := range p.Members {
		if m.Name != p.Survivor && other == "" {
			other = m.Name
		}
	}
	var points []string
	for _, s := range p.Steps {
		points = append(points, s.ID+":start")
		if s.ID == "backup" {
			points = append(points, "backup:"+p.Survivor+":copied")
		}
		if strings.HasPrefix(s.ID, "rejoin:") {
			points = append(points, s.ID+":started") // the learner runs, not yet caught up
		}
		if s.ID == "force-new-cluster" {
			// Left alone on disk, not started; then started, not yet serving.
			points = append(points, s.ID+":alone", s.ID+":started")
		}
		if s.ID == "restart-clean" {
			points = append(points, s.ID+":stopped") // the first run alone stopped, not started again
		}
		points = append(points, s.ID+":done")
		if s.ID == "backup" {
			points = append(points, "backup:"+other+":copied")
		}
	}
	bin := etcdtest.EtcdmedicBinary(t)
	for _, point := range points {
		// The background copy may crash the run after later steps finished: their points
		// cannot be reached any more.
		j, err := plan.OpenJournal(planDir)
		if err != nil {
			t.Fatal(err)
		}
		step, _, _ := strings.Cut(point, ":")
		if _, done := j.Done(step); done && !strings.HasSuffix(point, ":copied") {
			continue
		}
		cmd := exec.CommandContext(t.Context(), bin, "recover", "apply", planDir, "--yes")
		cmd.Env = append(os.Environ(), plan.CrashpointEnv+"="+point)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("apply with a crash at %s finished without crashing:\n%s", point, out)
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ProcessState.ExitCode() != -1 {
			t.Fatalf("apply with a crash at %s failed otherwise (%v):\n%s", point, err, lastLines(string(out), 15))
		}
		// Twice the machine also reboots: every etcd it ran is gone, and the rerun must start
		// the members already brought back.
		if point == "force-new-cluster:done" || point == "rejoin:"+other+":done" {
			reboot(t, c)
		}
	}
	out, err := exec.CommandContext(t.Context(), bin, "recover", "apply", planDir, "--yes").CombinedOutput()
	if err != nil {
		t.Fatalf("the final apply: %v\n%s", err, out)
	}
	checkRecovered(t, c, ledger, planDir)
}

// Bad input: clear errors, nothing changed.
func TestRecoverRefusesBadInput(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	// Quorum is not lost: recovery would only do harm.
	code, _, errOut := runCLI(t, recoverPlanArgs(t, c, planDir, backups)...)
	if code != exitCritical || !strings.Contains(errOut, "quorum is not lost") {
		t.Fatalf("healthy cluster: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "recover", "plan", "--plan-dir", planDir, "--backup-dir", backups, "--data-dir", "m1"); code != exitFailed || !strings.Contains(errOut, "NAME=PATH") {
		t.Fatalf("bad --data-dir: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "recover", "apply", filepath.Join(t.TempDir(), "none"), "--yes"); code != exitFailed || !strings.Contains(errOut, "no plan.json") {
		t.Fatalf("missing plan: exit %d %s", code, errOut)
	}
	// A plan edited by hand is refused.
	appliedEverywhere(t, c) // each member's name and client URLs are on record everywhere
	for _, m := range c.Members() {
		m.Kill()
	}
	if code, out, errOut := runCLI(t, recoverPlanArgs(t, c, planDir, backups)...); code != exitOK {
		t.Fatalf("plan: exit %d %s %s", code, out, errOut)
	}
	b, _ := os.ReadFile(filepath.Join(planDir, "plan.json"))
	os.WriteFile(filepath.Join(planDir, "plan.json"), []byte(strings.Replace(string(b), `"survivor": "m`, `"survivor": "x`, 1)), 0o600)
	if code, _, errOut := runCLI(t, "recover", "apply", planDir, "--yes"); code != exitFailed || !strings.Contains(errOut, "changed since it was made") {
		t.Fatalf("edited plan: exit %d %s", code, errOut)
	}
	os.WriteFile(filepath.Join(planDir, "plan.json"), []byte("{not json"), 0o600)
	if code, _, errOut := runCLI(t, "recover", "apply", planDir, "--yes"); code != exitFailed || !strings.Contains(errOut, "not a plan") {
		t.Fatalf("garbage plan: exit %d %s", code, errOut)
	}
}

// Five members of etcd v3.5.24 lost one after another under write load: each stopped at a
// different raft index. The survivor must be one of the two with the most history, the plan must
// show what the others lack, and the recovery (run by the same v3.5 binary) must lose nothing.
func TestRecoverFiveMembersOnV35ChoosesTheMostCompleteSurvivor(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 5, Version: etcdtest.V3_5_24})
	for _, m := range c.Members() {
		killLocalMember(t, m.DataDir)
	}
	ledger := etcdtest.StartLoad(t.Context(), t, c.Client(t), etcdtest.LoadSpec{Rate: 80})
	waitAcked(t, ledger, 20)
	// Each kill waits for 20 more writes acknowledged by the members left: a member killed
	// early then surely lacks them, however slowly the machine runs (fixed sleeps did not
	// ensure it under load).
	for _, name := range []string{"m5", "m4", "m3"} {
		waitAcked(t, ledger, len(ledger.Acked())+20)
		c.Member(name).Kill()
	}
	time.Sleep(500 * time.Millisecond)
	ledger.Stop()

	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	args := recoverPlanArgs(t, c, planDir, backups)
	for i, a := range args {
		if a == "--etcd-command" {
			args[i+1] = etcdtest.Binary(t, etcdtest.V3_5_24).Path
		}
	}
	code, out, errOut := runCLI(t, append(args, "-w", "json")...)
	if code != exitOK {
		t.Fatalf("recover plan: exit %d\n%s\n%s", code, out, errOut)
	}
	var pr recoverPlanResult
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatal(err)
	}
	// The survivor holds the most committed history (m3, killed last, may tie with m1 and m2):
	// by Raft's rule its log holds every entry any member knows committed, and the recovery
	// keeps all of its log.
	var best uint64
	for _, cand := range pr.Plan.Assessment.Candidates {
		best = max(best, cand.Committed())
	}
	if s := pr.Plan.Survivor; s == "m4" || s == "m5" || pr.Plan.Committed < best {
		t.Fatalf("survivor %s with %d committed, the most is %d", s, pr.Plan.Committed, best)
	}
	for _, cand := range pr.Plan.Assessment.Candidates {
		// Stopped early, it lacks entries, or (its log as long, by Raft's rule, but not yet
		// applied) revisions.
		if (cand.Name == "m4" || cand.Name == "m5") && ((cand.IndexGap == 0 && cand.RevisionGap == 0) || cand.Rejected != "") {
			t.Errorf("%s stopped early: want a usable candidate that lacks entries or revisions, got %+v", cand.Name, cand)
		}
	}
	if code, out, errOut := runCLI(t, "recover", "apply", planDir, "--yes"); code != exitOK {
		t.Fatalf("recover apply: exit %d\n%s\n%s", code, out, errOut)
	}
	var eps []string
	for _, m := range c.Members() {
		eps = append(eps, m.ClientURL)
	}
	code, d := waitDoctor(t, eps, func(d doctorJSON) bool { return d.Quorum.VotersUp == 5 && len(d.Findings) == 0 })
	if code != exitOK {
		t.Fatalf("doctor after recovery: exit %d %s", code, d.ids())
	}
	for _, m := range d.Members {
		if m.Probe == nil || m.Probe.Status == nil || m.Probe.Status.Version != "3.5.24" {
			t.Errorf("%s does not run v3.5.24 after recovery: %+v", m.Name, m.Probe)
		}
	}
	nothingLost(t, eps, ledger)
}

// More bad input, each refused with a clear error before anything changes: a data dir of
// another cluster, a manifest that is not YAML, and, on a rerun, a survivor's backup that is
// gone.
func TestRecoverRefusesDataAndManifestsItCannotUse(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	for _, m := range c.Members() {
		killLocalMember(t, m.DataDir)
	}
	other := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	other.Member("m1").Kill()
	c.Member("m3").Kill()
	c.Member("m2").Kill()
	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")

	args := recoverPlanArgs(t, c, planDir, backups)
	for i, a := range args {
		if strings.HasPrefix(a, "m3=") {
			args[i] = "m3=" + other.Member("m1").DataDir
		}
	}
	if code, _, errOut := runCLI(t, args...); code != exitFailed || !strings.Contains(errOut, "another cluster") {
		t.Fatalf("a data dir of another cluster: exit %d %s", code, errOut)
	}
	manifest := filepath.Join(t.TempDir(), "etcd.yaml")
	writeFile(t, manifest, "spec: [containers: {{ not yaml")
	if code, _, errOut := runCLI(t, append(recoverPlanArgs(t, c, planDir, backups), "--kubeadm-manifest", "m1="+manifest)...); code != exitFailed || !strings.Contains(errOut, "not YAML") {
		t.Fatalf("a manifest that is not YAML: exit %d %s", code, errOut)
	}
	if _, err := os.Stat(planDir); !os.IsNotExist(err) {
		t.Fatalf("a refused plan left %s behind: %v", planDir, err)
	}

	// The backup is taken, the process dies before the rebuild, the backups are deleted: the
	// rerun refuses rather than go on without a copy of the survivor as it was.
	if code, out, errOut := runCLI(t, recoverPlanArgs(t, c, planDir, backups)...); code != exitOK {
		t.Fatalf("recover plan: exit %d\n%s\n%s", code, out, errOut)
	}
	cmd := exec.CommandContext(t.Context(), etcdtest.EtcdmedicBinary(t), "recover", "apply", planDir, "--yes")
	cmd.Env = append(os.Environ(), plan.CrashpointEnv+"=force-new-cluster:start")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("no crash:\n%s", out)
	}
	if err := os.RemoveAll(backups); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "recover", "apply", planDir, "--yes")
	if code != exitCritical || !strings.Contains(errOut, "backup") || !strings.Contains(errOut, "nothing was changed") {
		t.Fatalf("rerun without the backups: exit %d %s", code, errOut)
	}
}

// reboot kills every etcd running on the cluster's data dirs, as a power cut would.
func reboot(t *testing.T, c *etcdtest.Cluster) {
	t.Helper()
	for _, m := range c.Members() {
		for i := 0; i < 100; i++ {
			pid, _, ok := local.FindProcess(m.DataDir)
			if !ok {
				break
			}
			syscall.Kill(pid, syscall.SIGKILL)
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// appliedEverywhere writes a key and waits until every member has applied it, and so every
// entry before it (a member's first publish of its name and client URLs among them): a member
// killed right after its first start may not have applied the others' yet.
func appliedEverywhere(t *testing.T, c *etcdtest.Cluster) {
	t.Helper()
	resp, err := c.Client(t).Put(t.Context(), "test/applied-everywhere", "1")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Members() {
		cli := m.Client(t)
		for i := 0; ; i++ {
			got, err := cli.Get(t.Context(), "test/applied-everywhere", clientv3.WithSerializable())
			if err == nil && got.Header.Revision >= resp.Header.Revision {
				break
			}
			if i == 100 {
				t.Fatalf("%s did not apply revision %d: %v", m.Name, resp.Header.Revision, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
