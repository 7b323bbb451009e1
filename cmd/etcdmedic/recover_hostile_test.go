package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/recovery"
	"github.com/etcdmedic/etcdmedic/runlock"
)

// The hostile conditions of a real quorum loss: what an operator in the middle of incident 2
// meets, and what etcdmedic must do in each. Every test runs a real cluster under write load
// and ends with every acknowledged write kept and every file of every data dir kept in a
// backup or a quarantine, or with the cluster untouched and a clear refusal.

// lostQuorumAllDown is incident 2 with every member down at the end: under write load m3 is
// killed and wiped, then m2 and m1 are killed. quiet stops the load first, so that every
// member holds every acknowledged write.
func lostQuorumAllDown(t *testing.T, spec etcdtest.ClusterSpec, quiet bool) (*etcdtest.Cluster, *etcdtest.Ledger) {
	t.Helper()
	if spec.Size == 0 {
		spec.Size = 3
	}
	c := etcdtest.NewCluster(t, spec)
	for _, m := range c.Members() {
		killLocalMember(t, m.DataDir) // recovery restarts members as detached local processes
	}
	ledger := etcdtest.StartLoad(t.Context(), t, c.Client(t), etcdtest.LoadSpec{Rate: 80})
	waitAcked(t, ledger, 40)
	if quiet {
		ledger.Stop()
		time.Sleep(500 * time.Millisecond) // the followers apply what the leader acknowledged
	}
	m3 := c.Member("m3")
	m3.Kill()
	if err := os.RemoveAll(m3.DataDir); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	c.Member("m2").Kill()
	time.Sleep(300 * time.Millisecond)
	c.Member("m1").Kill()
	ledger.Stop()
	return c, ledger
}

// dataDirSums lists every file of every member's data dir (through symlinks), as it is before
// the recovery touches anything.
func dataDirSums(t *testing.T, c *etcdtest.Cluster) map[string][]backup.FileSum {
	t.Helper()
	out := map[string][]backup.FileSum{}
	for _, m := range c.Members() {
		if _, err := os.Stat(m.DataDir); err != nil {
			continue
		}
		sums, _, err := backup.Checksum(m.DataDir, datadir.Ignorable)
		if err != nil {
			t.Fatalf("checksum %s: %v", m.DataDir, err)
		}
		out[m.Name] = sums
	}
	return out
}

// assertEveryFileKept checks that every file each data dir had is in that member's backup,
// byte for byte.
func assertEveryFileKept(t *testing.T, before map[string][]backup.FileSum, backups string) {
	t.Helper()
	for name, files := range before {
		var man struct {
			Files []backup.FileSum `json:"files"`
		}
		if err := backup.ReadJSON(filepath.Join(backups, name, "manifest.json"), &man); err != nil {
			t.Errorf("%s: no backup manifest: %v", name, err)
			continue
		}
		have := map[string]string{}
		for _, f := range man.Files {
			have[f.Path] = f.SHA256
		}
		for _, f := range files {
			if have[f.Path] != f.SHA256 {
				t.Errorf("%s: %s (sha256 %s) is not in its backup", name, f.Path, f.SHA256)
			}
		}
		if err := backup.Verify(filepath.Join(backups, name, "data"), man.Files); err != nil {
			t.Errorf("%s: backup does not verify: %v", name, err)
		}
	}
}

func planArgsFor(c *etcdtest.Cluster, planDir, backups, etcd string) []string {
	var eps []string
	for _, m := range c.Members() {
		eps = append(eps, m.ClientURL)
	}
	args := []string{"recover", "plan", "--plan-dir", planDir, "--backup-dir", backups, "--endpoints", strings.Join(eps, ","),
		"--command-timeout", "2s", "--etcd-command", etcd}
	for _, m := range c.Members() {
		args = append(args, "--data-dir", m.Name+"="+m.DataDir)
	}
	return args
}

func recoverPlan(t *testing.T, args ...string) recoverPlanResult {
	t.Helper()
	return recoverPlanWith(t, runCLI, args...)
}

func recoverPlanWith(t *testing.T, cli cliFunc, args ...string) recoverPlanResult {
	t.Helper()
	code, out, errOut := cli(t, append(args, "-w", "json")...)
	if code != exitOK {
		t.Fatalf("recover plan: exit %d\n%s\n%s", code, out, errOut)
	}
	var pr recoverPlanResult
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatal(err)
	}
	return pr
}

func recoverApply(t *testing.T, planDir string, extra ...string) {
	t.Helper()
	recoverApplyWith(t, runCLI, planDir, extra...)
}

func recoverApplyWith(t *testing.T, cli cliFunc, planDir string, extra ...string) {
	t.Helper()
	if code, out, errOut := cli(t, append([]string{"recover", "apply", planDir, "--yes"}, extra...)...); code != exitOK {
		t.Fatalf("recover apply: exit %d\n%s\n%s", code, out, errOut)
	}
}

// bestCommitted is the most committed history any readable data dir holds, read offline.
func bestCommitted(t *testing.T, c *etcdtest.Cluster) uint64 {
	var best uint64
	for _, m := range c.Members() {
		r, err := datadir.Inspect(m.DataDir, datadir.Options{})
		if err != nil || r.Raft == nil || r.Backend == nil {
			continue
		}
		best = max(best, r.Raft.HardState.Commit, r.Backend.ConsistentIndex)
	}
	return best
}

// supervise runs m's etcd under a shell loop that starts it again whenever it exits, as
// systemd's Restart=always or kubelet would. env configures it instead of flags when given.
// It returns the loop's pid file; the loop and its etcd die with the test.
func supervise(t *testing.T, m *etcdtest.Member, env []string, args []string) string {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "supervisor.pid")
	bin := etcdtest.EtcdmedicBinary(t)
	// The flags are in a file, as a unit's are in its unit file: nothing in the supervisor's
	// own command line names the data dir.
	argsFile := filepath.Join(t.TempDir(), "args")
	if err := os.WriteFile(argsFile, []byte(strings.Join(args, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	script := `echo $$ > "$PIDFILE"; while true; do "$BIN" etcd $(cat "$ARGS") >>"$LOG" 2>&1; sleep 0.3; done`
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(append(etcdFreeEnvForTest(), "LOG="+m.LogPath, "PIDFILE="+pidFile, "BIN="+bin, "ARGS="+argsFile), env...)
	startGroup(t, cmd)
	waitFor(t, "the supervised member to hold its data dir", func() bool { return datadir.RunningOn(m.DataDir) })
	return pidFile
}

func etcdFreeEnvForTest() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") && !strings.HasPrefix(kv, "ETCDCTL_") {
			env = append(env, kv)
		}
	}
	return env
}

// asEnvironment turns etcd flags (--name=m1) into the ETCD_* variables a distro's unit file
// sets instead (ETCD_NAME=m1).
func asEnvironment(flags []string) []string {
	var env []string
	for _, f := range flags {
		name, value, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		env = append(env, "ETCD_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))+"="+value)
	}
	return env
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// systemctlDouble makes a systemctl whose "stop UNIT" kills the process group whose leader's
// pid is in <dir>/UNIT.pid, as systemd stops a unit's whole cgroup, and returns a CLI that
// finds it first on its PATH.
func systemctlDouble(t *testing.T, units map[string]string) processCLI {
	t.Helper()
	dir := t.TempDir()
	for unit, pidFile := range units {
		if err := os.Symlink(pidFile, filepath.Join(dir, unit+".pid")); err != nil {
			t.Fatal(err)
		}
	}
	script := fmt.Sprintf("#!/bin/bash\n[ \"$1\" = stop ] || exit 1\npid=$(cat %s/\"$2\".pid) || exit 5\nkill -KILL -- -$pid\nfor i in $(seq 100); do grep -qv ') Z' /proc/$pid/stat 2>/dev/null || exit 0; sleep 0.05; done\nexit 1\n", dir)
	if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return processCLI{path: dir}
}

// 1. Incident 2 as it happens: a member's supervisor starts it again while quorum is lost. It
// holds its data dir locked and serves nothing. plan stops it, through its systemd unit, reads
// its history from disk, and rebuilds from the member with the most. A supervisor plan does
// not know is named, with the command that stops it, and nothing else is done.
func TestHostileSupervisorRestartsAMember(t *testing.T) {
	t.Parallel()
	c, ledger := lostQuorumAllDown(t, etcdtest.ClusterSpec{}, false)
	best := bestCommitted(t, c)
	m1 := c.Member("m1")
	pidFile := supervise(t, m1, nil, m1.Flags())
	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	args := planArgsFor(c, planDir, backups, etcdmedicEtcd(t))

	code, _, errOut := runCLI(t, args...)
	if code == exitOK || !strings.Contains(errOut, "started again") || !strings.Contains(errOut, "stop its supervisor first (pid") {
		t.Fatalf("plan with an unknown supervisor restarting m1: exit %d %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(planDir, plan.File)); err == nil {
		t.Fatal("a refused plan was saved")
	}

	cli := systemctlDouble(t, map[string]string{"etcd-m1.service": pidFile})
	pr := recoverPlanWith(t, cli.run, append(args, "--systemd-unit", "m1=etcd-m1.service")...)
	s := pr.Plan.Assessment.SurvivorCandidate()
	if s.Kept() < best {
		t.Fatalf("survivor %s keeps %d entries, the best data dir knows %d committed", s.Name, s.Kept(), best)
	}
	for _, cand := range pr.Plan.Assessment.Candidates {
		if cand.Name == "m1" && (cand.StoppedByPlan == "" || cand.Liveness.State != recovery.StateRunning) {
			t.Errorf("m1 %+v: plan must say it found it running and stopped it", cand)
		}
	}
	before := dataDirSums(t, c)
	recoverApplyWith(t, cli.run, planDir)
	checkRecovered(t, c, ledger, planDir)
	assertEveryFileKept(t, before, backups)
}

// 2. apply fails closed. Between plan and apply the members came back and the cluster has
// quorum again; apply is run with a wrong --cacert, so no probe gets an answer. It must not
// take that silence for "down": it refuses, and the cluster is untouched.
func TestHostileApplyRefusesWhatItCannotSee(t *testing.T) {
	t.Parallel()
	certs := etcdtest.NewCerts(t, "")
	c, ledger := lostQuorumAllDown(t, etcdtest.ClusterSpec{TLS: certs}, false)
	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	tls := []string{"--cacert", certs.CAFile, "--cert", certs.ClientCertFile, "--key", certs.ClientKeyFile}
	recoverPlan(t, append(planArgsFor(c, planDir, backups, etcdmedicEtcd(t)), tls...)...)

	// The operator brings the members back by hand: quorum is back.
	for _, name := range []string{"m1", "m2"} {
		if err := c.Member(name).Start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"m1", "m2"} {
		if err := c.Member(name).WaitReady(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCLI(t, "recover", "apply", planDir, "--yes", "--cacert", certs.OtherCAFile)
	if code != exitCritical || !strings.Contains(errOut, "cannot tell whether quorum is lost") {
		t.Fatalf("apply with a wrong CA on a cluster with quorum: exit %d\n%s\n%s", code, out, errOut)
	}
	// The plan's certificates, with time for two TLS handshakes per member on a loaded machine
	// (the plan's 2 s can leave a member unknown, and apply then rightly cannot tell).
	code, _, errOut = runCLI(t, "recover", "apply", planDir, "--yes", "--command-timeout", "10s")
	if code != exitCritical || !strings.Contains(errOut, "quorum is not lost") {
		t.Fatalf("apply with the plan's certificates on a cluster with quorum: exit %d\n%s", code, errOut)
	}
	if j, err := plan.OpenJournal(planDir); err != nil || !j.Empty() {
		t.Fatalf("a refused apply started steps: %v %v", err, j.Events())
	}
	for _, name := range []string{"m1", "m2"} {
		if !c.Member(name).IsRunning() {
			t.Errorf("%s was stopped by a refused apply", name)
		}
	}
	if _, err := os.Stat(backups); err == nil {
		t.Error("a refused apply made backups")
	}
	cli := c.ClientExcept(t, c.Member("m3"))
	missing, err := etcdtest.MissingWrites(t.Context(), cli, ledger.Acked())
	if err != nil || len(missing) > 0 {
		t.Fatalf("%d acknowledged writes lost (%v)", len(missing), err)
	}
}

// 3. Data dirs behind symlinks: m1's data dir is a link to another disk, m2's WAL is on a disk
// of its own (etcd's --wal-dir advice, done with a link). Everything is backed up through the
// links, m2's old data is quarantined whole, the WAL left on its disk untouched.
func TestHostileSymlinkedDataDirs(t *testing.T) {
	t.Parallel()
	c, ledger := lostQuorumAllDown(t, etcdtest.ClusterSpec{}, false)
	disk1, walDisk := t.TempDir(), t.TempDir()
	m1, m2 := c.Member("m1"), c.Member("m2")
	real1 := filepath.Join(disk1, "m1-etcd")
	if err := os.Rename(m1.DataDir, real1); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real1, m1.DataDir); err != nil {
		t.Fatal(err)
	}
	killLocalMember(t, real1) // the recovery runs m1 on its real data dir, and keeps its pid file beside it
	wal2 := filepath.Join(walDisk, "m2-wal")
	if err := os.Rename(filepath.Join(m2.DataDir, "member", "wal"), wal2); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(wal2, filepath.Join(m2.DataDir, "member", "wal")); err != nil {
		t.Fatal(err)
	}
	walSums, _, err := backup.Checksum(wal2, nil)
	if err != nil || len(walSums) == 0 {
		t.Fatalf("m2's WAL: %v (%d files)", err, len(walSums))
	}
	before := dataDirSums(t, c)
	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	pr := recoverPlan(t, planArgsFor(c, planDir, backups, etcdmedicEtcd(t))...)
	if m := pr.Plan.Member("m1"); m.DataDir != real1 || m.GivenDataDir != m1.DataDir {
		t.Errorf("m1's data dir recorded as %q (given %q): want both forms", m.DataDir, m.GivenDataDir)
	}
	recoverApply(t, planDir)
	checkRecovered(t, c, ledger, planDir)
	assertEveryFileKept(t, before, backups)
	if err := backup.Verify(wal2, walSums); err != nil && pr.Plan.Survivor != "m2" {
		t.Errorf("m2's WAL on its own disk changed: %v", err)
	}
}

// 4. A member configured by the environment only (a distro's unit file sets ETCD_DATA_DIR and
// friends): started again between plan and apply, it has no --data-dir for a process table to
// find. apply's stop finds it by the files it holds, and proves the stop by the data dir's locks.
func TestHostileEnvironmentConfiguredMember(t *testing.T) {
	t.Parallel()
	c, ledger := lostQuorumAllDown(t, etcdtest.ClusterSpec{}, false)
	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	pr := recoverPlan(t, planArgsFor(c, planDir, backups, etcdmedicEtcd(t))...)
	before := dataDirSums(t, c)
	s := c.Member(pr.Plan.Survivor)
	delete(before, s.Name) // it runs again before apply: its files change, its backup is taken once apply stops it
	cmd := exec.Command(etcdtest.EtcdmedicBinary(t), "etcd")
	cmd.Env = append(etcdFreeEnvForTest(), asEnvironment(s.Flags())...)
	log, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	waitFor(t, "the env-configured survivor to hold its data dir", func() bool { return datadir.RunningOn(s.DataDir) })

	recoverApply(t, planDir)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the env-configured member still runs beside the rebuilt cluster")
	}
	checkRecovered(t, c, ledger, planDir)
	assertEveryFileKept(t, before, backups)
}

// 5. Two applies of one plan at once: exactly one runs, the other refuses at once and names
// the run that holds the plan.
func TestHostileTwoAppliesAtOnce(t *testing.T) {
	t.Parallel()
	c, ledger := lostQuorumAllDown(t, etcdtest.ClusterSpec{}, false)
	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	recoverPlan(t, planArgsFor(c, planDir, backups, etcdmedicEtcd(t))...)
	before := dataDirSums(t, c)

	// Held by another run: refused before anything, the holder named.
	held, err := runlock.Acquire(planDir, "recover apply")
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "recover", "apply", planDir, "--yes")
	if code != exitFailed || !strings.Contains(errOut, fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("apply while another run holds the plan: exit %d %s", code, errOut)
	}
	held.Release()

	bin := etcdtest.EtcdmedicBinary(t)
	var wg sync.WaitGroup
	outs := make([]string, 2)
	codes := make([]int, 2)
	for i := range 2 {
		wg.Go(func() {
			out, err := exec.CommandContext(t.Context(), bin, "recover", "apply", planDir, "--yes").CombinedOutput()
			outs[i], codes[i] = string(out), 0
			if ee, ok := err.(*exec.ExitError); ok {
				codes[i] = ee.ExitCode()
			} else if err != nil {
				codes[i] = -1
			}
		})
	}
	wg.Wait()
	ok, refused := 0, 0
	for i := range 2 {
		switch {
		case codes[i] == exitOK:
			ok++
		case codes[i] == exitFailed && strings.Contains(outs[i], "in use by another etcdmedic run"):
			refused++
		default:
			t.Errorf("apply %d: exit %d\n%s", i, codes[i], lastLines(outs[i], 15))
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("two applies at once: %d finished, %d refused; want one each", ok, refused)
	}
	checkRecovered(t, c, ledger, planDir)
	assertEveryFileKept(t, before, backups)
}

// 7. A damaged page in the db of the member with the most history: it would be forced into
// the new cluster and streamed to every member. plan reads every page, will not use it, and
// will not move it aside unless the operator accepts the loss by name.
func TestHostileDamagedPageOnTheBestMember(t *testing.T) {
	t.Parallel()
	c, ledger := lostQuorumAllDown(t, etcdtest.ClusterSpec{}, true)
	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	args := planArgsFor(c, planDir, backups, etcdmedicEtcd(t))
	// The member plan would choose, with one of its key pages damaged.
	probe := recoverPlan(t, planArgsFor(c, filepath.Join(t.TempDir(), "probe"), filepath.Join(t.TempDir(), "b"), etcdmedicEtcd(t))...)
	best := c.Member(probe.Plan.Survivor)
	damageLeftmostKeyPage(t, filepath.Join(best.DataDir, "member", "snap", "db"))
	before := dataDirSums(t, c)

	code, _, errOut := runCLI(t, args...)
	if code == exitOK || !strings.Contains(errOut, "--discard-unreadable "+best.Name) {
		t.Fatalf("plan with a damaged page on %s: exit %d %s", best.Name, code, errOut)
	}
	pr := recoverPlan(t, append(args, "--discard-unreadable", best.Name)...)
	if pr.Plan.Survivor == best.Name {
		t.Fatalf("the damaged %s was chosen as the survivor", best.Name)
	}
	recoverApply(t, planDir)
	checkRecovered(t, c, ledger, planDir)
	assertEveryFileKept(t, before, backups)
}

// damageLeftmostKeyPage fills the elements of the leftmost leaf under the key bucket's root
// with 0xff: a read of the newest revision (down the right edge) does not see it; a page check
// does.
func damageLeftmostKeyPage(t *testing.T, dbPath string) {
	t.Helper()
	damageKeyBucketPage(t, dbPath, func(_ uint64, kids []uint64) (uint64, func([]byte)) {
		return kids[0], func(p []byte) {
			for i := 16; i < len(p); i++ {
				p[i] = 0xff
			}
		}
	})
}

// 8. A member removed before the loss, its data dir still listed: it is not added back
// silently. The plan shows its standing and leaves it alone.
func TestHostileRemovedMemberIsLeftAlone(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 4})
	m4 := c.Member("m4")
	c.RemoveMember(t, m4)
	for _, m := range c.Members() {
		killLocalMember(t, m.DataDir)
	}
	ledger := etcdtest.StartLoad(t.Context(), t, c.Client(t), etcdtest.LoadSpec{Rate: 80})
	waitAcked(t, ledger, 40)
	c.Member("m3").Kill()
	os.RemoveAll(c.Member("m3").DataDir)
	time.Sleep(300 * time.Millisecond)
	c.Member("m2").Kill()
	c.Member("m1").Kill()
	ledger.Stop()
	m4Sums, _, err := backup.Checksum(m4.DataDir, nil)
	if err != nil {
		t.Fatal(err)
	}

	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	pr := recoverPlan(t, append(planArgsFor(c, planDir, backups, etcdmedicEtcd(t)), "--data-dir", "m4="+m4.DataDir)...)
	if len(pr.Plan.LeftOut) != 1 || pr.Plan.LeftOut[0].Name != "m4" || pr.Plan.Member("m4").Name != "" {
		t.Fatalf("m4 was removed before the loss: the plan must leave it out; left out %+v, members %d", pr.Plan.LeftOut, len(pr.Plan.Members))
	}
	for _, cand := range pr.Plan.Assessment.Candidates {
		if cand.Name == "m4" && !strings.HasPrefix(cand.Standing, recovery.StandingRemoved) {
			t.Errorf("m4's standing %q: want removed", cand.Standing)
		}
	}
	recoverApply(t, planDir)
	checkRecovered(t, c, ledger, planDir)
	if err := backup.Verify(m4.DataDir, m4Sums); err != nil {
		t.Errorf("m4's data dir was touched: %v", err)
	}
	if qs, _ := filepath.Glob(m4.DataDir + ".etcdmedic-quarantine*"); len(qs) > 0 {
		t.Errorf("m4 was quarantined: %v", qs)
	}
}

// 9. The backup disk: plan refuses a backup folder too small for the data dirs; a disk that
// fills during the backup stops apply before anything destructive, and a rerun finishes.
func TestHostileBackupDiskFills(t *testing.T) {
	t.Parallel()
	small, big := mountTmpfs(t, "8m"), mountTmpfs(t, "600m")
	c, ledger := lostQuorumAllDown(t, etcdtest.ClusterSpec{}, false)
	planDir := filepath.Join(t.TempDir(), "plan")
	code, _, errOut := runCLI(t, planArgsFor(c, planDir, filepath.Join(small, "backups"), etcdmedicEtcd(t))...)
	if code == exitOK || !strings.Contains(errOut, "MiB free") {
		t.Fatalf("plan onto an 8 MiB disk: exit %d %s", code, errOut)
	}
	backups := filepath.Join(big, "backups")
	recoverPlan(t, planArgsFor(c, planDir, backups, etcdmedicEtcd(t))...)
	before := dataDirSums(t, c)
	// The disk fills between plan and apply: 4 MiB left.
	filler := filepath.Join(big, "filler")
	fillDisk(t, big, filler, 4<<20)
	code, _, errOut = runCLI(t, "recover", "apply", planDir, "--yes")
	if code == exitOK || !strings.Contains(errOut, "no space left on device") {
		t.Fatalf("apply onto a full disk: exit %d %s", code, errOut)
	}
	j, err := plan.OpenJournal(planDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, started := j.StartedAt("force-new-cluster"); started {
		t.Fatal("the survivor was forced without its backup")
	}
	if got := dataDirSums(t, c); len(got) != len(before) {
		t.Fatal("a data dir changed while the backup failed")
	}
	for name, files := range before {
		if err := backup.Verify(c.Member(name).DataDir, files); err != nil {
			t.Errorf("%s's data dir changed although its backup failed: %v", name, err)
		}
	}
	os.Remove(filler)
	recoverApply(t, planDir)
	checkRecovered(t, c, ledger, planDir)
	assertEveryFileKept(t, before, backups)
}

// mountTmpfs mounts a tmpfs of the given size (root only) and unmounts it when the test ends.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("a small filesystem is needed (tmpfs mount as root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fillDisk writes a file that leaves about leave bytes free.
func fillDisk(t *testing.T, dir, filler string, leave int64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for n := int64(0); n < free-leave; n += int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), free-leave-n)]); err != nil {
			t.Fatal(err)
		}
	}
}
