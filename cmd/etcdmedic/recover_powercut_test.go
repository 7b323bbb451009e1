package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/guard"
	"github.com/etcdmedic/etcdmedic/internal/crashfs"
	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/recovery"
	"github.com/etcdmedic/etcdmedic/upgrade"
)

// hostDisk is one machine's disk on the crash filesystem: the members' data dirs, the plan and
// the backups all live on it, so one power cut hits all of them at once. It is served by its
// own process (`etcdmedic internal-crashfs`): this test process reads dbs on it through mmap.
type hostDisk struct {
	t                *testing.T
	backing, mounted string
	fs               crashfs.Disk
	rng              *rand.Rand
}

func newHostDisk(t *testing.T) *hostDisk {
	t.Helper()
	d := &hostDisk{t: t, backing: t.TempDir(), mounted: filepath.Join(t.TempDir(), "host"), rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))}
	d.plugIn()
	return d
}

func (d *hostDisk) plugIn() {
	d.t.Helper()
	fs, err := crashfs.Start([]string{etcdtest.EtcdmedicBinary(d.t), crashFSCommand}, d.backing, d.mounted)
	if errors.Is(err, crashfs.ErrUnavailable) {
		d.t.Skipf("needs the FUSE crash filesystem: %v", err)
	}
	if err != nil {
		d.t.Fatal(err)
	}
	d.fs = fs
	d.t.Cleanup(func() {
		// Whatever still runs on it goes first; a file still open there (a process exiting)
		// makes the unmount busy for a moment, and the disk's folder could not be removed.
		var err error
		for range 20 {
			etcdtest.KillUnder(d.mounted)
			if err = fs.Unmount(); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		d.t.Logf("unmount %s: %v", d.mounted, err)
	})
}

// crashAt runs etcdmedic with args until it kills itself at the crash point, then cuts the
// power: what it was doing is interrupted exactly there, with the disk as its syncs left it.
func (d *hostDisk) crashAt(point string, args ...string) {
	d.t.Helper()
	cmd := exec.CommandContext(d.t.Context(), etcdtest.EtcdmedicBinary(d.t), args...)
	cmd.Env = append(os.Environ(), plan.CrashpointEnv+"="+point)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ProcessState.ExitCode() != -1 {
		d.t.Fatalf("etcdmedic %s with a crash at %s: %v\n%s", strings.Join(args, " "), point, err, lastLines(string(out), 15))
	}
	d.t.Logf("cut at %s: %s", point, d.powerCut())
}

// powerCut kills every process using the disk at once, drops every write not fsynced (the
// last one torn) and brings the disk back.
func (d *hostDisk) powerCut() string {
	d.t.Helper()
	etcdtest.KillUnder(d.mounted)
	rep, err := d.fs.Cut(crashfs.CutOptions{Tear: true, Rand: d.rng})
	if err != nil {
		d.t.Fatalf("power cut: %v", err)
	}
	d.plugIn()
	return rep.String()
}

// A power cut in the middle of recover apply, on the machine that runs it: the members' data
// dirs, the plan and the backups on one crash filesystem. Once right after plan, then at points
// inside apply (etcdmedic killed there, every etcd with it, every unsynced write dropped, the
// last one torn); each time the power comes back and apply runs again. It finishes, and no
// acknowledged write is lost: etcdmedic's own files (plan, journal, backups, quarantines) are
// fsynced before it relies on them.
func TestRecoverFinishesAfterPowerCutsInItsOwnWork(t *testing.T) {
	t.Parallel()
	disk := newHostDisk(t)
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, Dir: disk.mounted})
	ledger := etcdtest.StartLoad(t.Context(), t, c.Client(t), etcdtest.LoadSpec{Rate: 80})
	waitAcked(t, ledger, 40)
	m3 := c.Member("m3")
	m3.Kill()
	if err := os.RemoveAll(m3.DataDir); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	c.Member("m2").Kill()
	time.Sleep(300 * time.Millisecond)
	ledger.Stop()

	planDir, backups := filepath.Join(disk.mounted, "plan"), filepath.Join(disk.mounted, "backups")
	if code, out, errOut := runCLI(t, recoverPlanArgs(t, c, planDir, backups)...); code != exitOK {
		t.Fatalf("recover plan: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("cut right after plan: %s", disk.powerCut())
	p, err := recovery.LoadPlan(planDir)
	if err != nil {
		t.Fatalf("the plan after a power cut: %v", err)
	}
	other := "m2"
	if p.Survivor == "m2" {
		other = "m1"
	}
	bin := etcdtest.EtcdmedicBinary(t)
	// plan copied the survivor while it watched m1 stopped (the cut right after plan came after
	// that); apply copies the others, here once the survivor is rebuilt.
	if p.Assessment.SurvivorBackup == "" {
		t.Fatal("plan stopped m1 and watched it, but took no backup of the survivor meanwhile")
	}
	for _, point := range []string{"force-new-cluster:alone", "force-new-cluster:done", "backup:" + other + ":copied", "rejoin:" + other + ":started"} {
		if _, err := os.Stat(filepath.Join(backups, other, "manifest.json")); err == nil && strings.HasPrefix(point, "backup:") {
			continue // its background copy finished (and was synced) before the last cut
		}
		disk.crashAt(point, "recover", "apply", planDir, "--yes")
	}
	out, err := exec.CommandContext(t.Context(), bin, "recover", "apply", planDir, "--yes").CombinedOutput()
	if err != nil {
		t.Fatalf("apply after the last power cut: %v\n%s", err, out)
	}
	checkRecovered(t, c, ledger, planDir)
}

// guard --fix moving a foreign data dir into quarantine on a crash filesystem, the power cut
// in the middle of its work twice (manifest written; data moved, not yet verified): run again
// after each, it finishes, and the quarantine holds every file the data dir held, byte for byte.
func TestGuardFixFinishesAfterPowerCutsInItsOwnWork(t *testing.T) {
	t.Parallel()
	disk := newHostDisk(t)
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	other := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Dir: disk.mounted})
	om := other.Member("m1")
	if err := om.Stop(); err != nil {
		t.Fatal(err)
	}
	disk.powerCut() // the disk as it will stay: what the member synced
	before, _, err := backup.Checksum(om.DataDir, nil)
	if err != nil || len(before) == 0 {
		t.Fatalf("checksum the data dir: %v", err)
	}
	client, peer := newURLs(t)
	addLearner(t, c.Client(t), peer) // c is then proven to be m4's cluster: the other's data moves
	args := []string{"--data-dir", om.DataDir, "--name", "m4", "--peer-urls", peer, "--client-urls", client, "--endpoints", strings.Join(c.Endpoints(), ","), "--fix"}
	for _, point := range []string{"quarantine:manifest", "quarantine:moved"} {
		disk.crashAt(point, append([]string{"guard", "--command-timeout", "3s"}, args...)...)
	}
	code, g, errOut := runGuard(t, args...)
	if g.Quarantined == nil {
		t.Fatalf("guard --fix after the power cuts: exit %d, %+v\n%s", code, g, errOut)
	}
	if err := guard.Verify(g.Quarantined.Dir); err != nil {
		t.Fatal(err)
	}
	if err := backup.Verify(filepath.Join(g.Quarantined.Dir, "data"), before); err != nil {
		t.Fatalf("the quarantine is not the data dir as it was: %v", err)
	}
}

// upgrade apply of incident 3's cluster (v3.5.19, two promoted learners) to v3.6, on one host
// disk with its plan and snapshot, the power cut after the snapshot and in the middle of the
// second hop: every member dies with it, and the rerun starts each again on the version it was
// on (the plan's v3.5.19, or the hop it had started), then finishes the upgrade, losing nothing.
func TestUpgradeApplyFinishesAfterPowerCutsInItsOwnWork(t *testing.T) {
	t.Parallel()
	disk := newHostDisk(t)
	c := v3519WithPromotedLearnersIn(t, disk.mounted)
	ledger := etcdtest.StartLoad(t.Context(), t, c.Client(t), etcdtest.LoadSpec{Rate: 30})
	waitAcked(t, ledger, 10)
	planDir, backups := filepath.Join(disk.mounted, "plan"), filepath.Join(disk.mounted, "backups")
	args, eps := upgradePlanArgs(t, c, planDir, backups, etcdtest.V3_5_19, etcdtest.V3_5_24, etcdtest.V3_6)
	if code, out, errOut := runCLI(t, args...); code != exitOK {
		t.Fatalf("upgrade plan: exit %d\n%s\n%s", code, out, errOut)
	}
	p, err := upgrade.LoadPlan(planDir)
	if err != nil {
		t.Fatal(err)
	}
	var second string
	for _, s := range p.Steps {
		if strings.HasPrefix(s.ID, "hop1:") {
			second = s.ID
			break
		}
	}
	bin := etcdtest.EtcdmedicBinary(t)
	for _, point := range []string{"snapshot:done", second + ":start"} {
		disk.crashAt(point, "upgrade", "apply", planDir, "--yes")
		ledger.Stop() // the power is gone: nothing answers any more
	}
	out, err := exec.CommandContext(t.Context(), bin, "upgrade", "apply", planDir, "--yes").CombinedOutput()
	if err != nil {
		t.Fatalf("upgrade apply after the power cuts: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "does not run (the machine rebooted?)") {
		t.Errorf("the rerun did not say it restarted the members:\n%s", out)
	}
	code, rep := upgradeCheck(t, "--to", "v3.7.3", "--endpoints", strings.Join(eps, ","), "--fetch-backends")
	for _, m := range rep.Members {
		if m.Version != "3.6.16" || len(m.Drifts) != 0 {
			t.Errorf("%s after the upgrade: version %s, drifts %+v (exit %d)", m.Name, m.Version, m.Drifts, code)
		}
	}
	nothingLost(t, eps, ledger)
}

// recover --from-snapshot on one host disk, the power cut once the restored member has taken
// the survivor's place (old data quarantined, restore moved in, not yet started) and once a
// learner runs: each rerun finishes, and the cluster serves the snapshot's keys.
func TestRecoverFromSnapshotFinishesAfterPowerCutsInItsOwnWork(t *testing.T) {
	t.Parallel()
	version := etcdtest.V3_6
	etcdutl, err := etcdbin.EtcdutlPath(t.Context(), version)
	if err != nil {
		t.Fatal(err)
	}
	disk := newHostDisk(t)
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, Version: version, Dir: disk.mounted})
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, k := range []string{"/registry/pods/a", "/registry/pods/b"} {
		if _, err := cli.Put(ctx, k, "in the snapshot"); err != nil {
			t.Fatal(err)
		}
	}
	snapFile := filepath.Join(t.TempDir(), "nightly.db") // kept off this host, as backups are
	// From the leader: it applied both puts before acknowledging them; a follower may not have
	// applied the second yet (seen under load: a snapshot with 1 key, and so a restore with 1).
	saveSnapshot(t, c.Leader(t).Client(t), snapFile)
	c.Member("m3").Kill()
	c.Member("m2").Kill()
	disk.powerCut() // and the survivor with it: the snapshot file is what its save synced

	planDir, backups := filepath.Join(disk.mounted, "plan"), filepath.Join(disk.mounted, "backups")
	args := recoverPlanArgs(t, c, planDir, backups)
	for i, a := range args {
		if a == "--etcd-command" {
			args[i+1] = etcdtest.Binary(t, version).Path
		}
	}
	args = append(args, "--from-snapshot", snapFile, "--etcdutl", etcdutl, "--bump-revision", "1000", "--mark-compacted")
	if code, out, errOut := runCLI(t, args...); code != exitOK {
		t.Fatalf("recover plan: exit %d\n%s\n%s", code, out, errOut)
	}
	p, err := recovery.LoadPlan(planDir)
	if err != nil {
		t.Fatal(err)
	}
	other := "m2"
	if p.Survivor == "m2" {
		other = "m1"
	}
	bin := etcdtest.EtcdmedicBinary(t)
	for _, point := range []string{"restore-snapshot:moved", "rejoin:" + other + ":started"} {
		disk.crashAt(point, "recover", "apply", planDir, "--yes")
	}
	if out, err := exec.CommandContext(t.Context(), bin, "recover", "apply", planDir, "--yes").CombinedOutput(); err != nil {
		t.Fatalf("apply after the power cuts: %v\n%s", err, out)
	}
	// A context of its own: the cuts and reruns take most of the first one's 30 s on a busy machine.
	rctx, rcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer rcancel()
	got, err := healthyAfterRestore(t, c).Get(rctx, "/registry/pods/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("after the restore: %v; want the snapshot's 2 keys", err)
	}
	if len(got.Kvs) != 2 {
		t.Fatalf("after the restore: %d keys; want the snapshot's 2", len(got.Kvs))
	}
}

// Incident 2 on kubeadm masters whose disk loses power in the middle of the recovery: etcd as
// static pods run by a kubelet double from manifests on the crash filesystem, master2's
// manifest broken by a hand edit, master3's etcd data wiped; recover through all three
// manifests, the power cut once the survivor is left alone (every manifest moved out) and once
// a learner runs. After each cut kubelet starts whatever manifest the disk kept, as it does after
// a reboot; apply run again finishes, and no manifest keeps a recovery flag.
func TestRecoverKubeadmStaticPodsFinishesAfterPowerCuts(t *testing.T) {
	t.Parallel()
	disk := newHostDisk(t)
	ms, cli := startKubeadmMasters(t, disk.mounted)
	var eps []string
	for _, m := range ms {
		eps = append(eps, m.client)
		// kubeadm wrote the manifests long ago: the kernel has written them back since.
		if err := backup.SyncTree(filepath.Dir(m.manifest)); err != nil {
			t.Fatal(err)
		}
	}
	ledger := etcdtest.StartLoad(t.Context(), t, cli, etcdtest.LoadSpec{Rate: 40})
	waitAcked(t, ledger, 20)
	for _, m := range ms[1:] {
		b, _ := os.ReadFile(m.manifest)
		writeFile(t, m.manifest, strings.Replace(string(b), "--initial-cluster-state=existing", "--initial-cluster-state=bogus", 1))
	}
	waitNoProcess(t, ms[2].dataDir)
	os.RemoveAll(ms[2].dataDir)
	waitDoctor(t, eps, func(d doctorJSON) bool { return d.find("quorum-lost") != nil })
	ledger.Stop()

	planDir, backups := filepath.Join(disk.mounted, "plan"), filepath.Join(disk.mounted, "backups")
	args := []string{"recover", "plan", "--plan-dir", planDir, "--backup-dir", backups, "--endpoints", strings.Join(eps, ","), "--command-timeout", "2s"}
	for _, m := range ms {
		args = append(args, "--kubeadm-manifest", m.name+"="+m.manifest, "--data-dir", m.name+"="+m.dataDir)
	}
	if code, out, errOut := runCLI(t, args...); code != exitOK || !strings.Contains(out, "SURVIVOR") {
		t.Fatalf("recover plan: exit %d\n%s\n%s", code, out, errOut)
	}
	p, err := recovery.LoadPlan(planDir)
	if err != nil {
		t.Fatal(err)
	}
	other := "master2"
	if p.Survivor == other {
		other = "master1"
	}
	for _, point := range []string{"force-new-cluster:alone", "rejoin:" + other + ":started"} {
		disk.crashAt(point, "recover", "apply", planDir, "--yes")
	}
	if out, err := exec.CommandContext(t.Context(), etcdtest.EtcdmedicBinary(t), "recover", "apply", planDir, "--yes").CombinedOutput(); err != nil {
		t.Fatalf("apply after the power cuts: %v\n%s", err, out)
	}
	if code, d := waitDoctor(t, eps, func(d doctorJSON) bool { return d.Quorum.VotersUp == 3 && len(d.Findings) == 0 }); code != exitOK {
		t.Fatalf("doctor: exit %d %s", code, d.ids())
	}
	for _, m := range ms {
		if b, err := os.ReadFile(m.manifest); err != nil || strings.Contains(string(b), "force-new-cluster") || strings.Contains(string(b), "bogus") {
			t.Errorf("%s's manifest after recovery (%v):\n%s", m.name, err, b)
		}
	}
	nothingLost(t, eps, ledger)
}
