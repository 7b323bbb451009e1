package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/finding"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/upgrade"
)

// v3519WithPromotedLearners is incident 3's cluster: one v3.5.19 member, two members added as
// learners and promoted.
func v3519WithPromotedLearners(t *testing.T) *etcdtest.Cluster {
	return v3519WithPromotedLearnersIn(t, "")
}

// v3519WithPromotedLearnersIn is v3519WithPromotedLearners with the data dirs in dir ("": a
// temporary one).
func v3519WithPromotedLearnersIn(t *testing.T, dir string) *etcdtest.Cluster {
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_5_19, Dir: dir})
	for _, name := range []string{"m2", "m3"} {
		m := c.AddMember(t, name, etcdtest.AddOptions{Learner: true})
		c.PromoteMember(t, m)
	}
	return c
}

func upgradeCheck(t *testing.T, args ...string) (int, *upgrade.Report) {
	t.Helper()
	code, out, errOut := runCLI(t, append([]string{"upgrade", "check", "-w", "json"}, args...)...)
	var rep upgrade.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("upgrade check printed no JSON (exit %d): %v\n%s", code, err, errOut)
	}
	return code, &rep
}

func hasUpgradeFinding(rep *upgrade.Report, id string) bool {
	for _, f := range rep.Findings {
		if f.ID == id {
			return true
		}
	}
	return false
}

func TestUpgradeCheckBlocksIncident3(t *testing.T) {
	t.Parallel()
	c := v3519WithPromotedLearners(t)
	eps := strings.Join(c.Endpoints(), ",")

	// Online, v3.5 shows only the v2 store: blocked by the version, and drift unknown.
	code, rep := upgradeCheck(t, "--to", "v3.6.16", "--endpoints", eps)
	if code != exitCritical || rep.Verdict != "BLOCKED" || !hasUpgradeFinding(rep, upgrade.IDTooOld) || !hasUpgradeFinding(rep, upgrade.IDMembershipUnknown) {
		t.Fatalf("online: exit %d %+v", code, rep.Findings)
	}
	// With each member's db fetched, the drift itself shows, member by member.
	code, rep = upgradeCheck(t, "--to", "v3.6.16", "--endpoints", eps, "--fetch-backends")
	if code != exitCritical || !hasUpgradeFinding(rep, upgrade.IDMembershipDrift) || hasUpgradeFinding(rep, upgrade.IDMembershipUnknown) {
		t.Fatalf("--fetch-backends: exit %d %+v", code, rep.Findings)
	}
	if len(rep.Path) < 3 || !strings.Contains(strings.Join(rep.Path, " "), "v3.5.24") {
		t.Errorf("the path should go through v3.5.24: %v", rep.Path)
	}
	// Offline, from the stopped members' data dirs.
	var dirs []string
	for _, m := range c.Members() {
		m.Stop()
		dirs = append(dirs, "--data-dir", m.Name+"="+m.DataDir)
	}
	code, rep = upgradeCheck(t, append([]string{"--to", "v3.6.16", "--from", "v3.5.19"}, dirs...)...)
	if code != exitCritical || !hasUpgradeFinding(rep, upgrade.IDMembershipDrift) {
		t.Fatalf("offline: exit %d %+v", code, rep.Findings)
	}
}

// A cluster built on a fixed version is SAFE for v3.6, and blocked for v3.7 (one minor at a time).
func TestUpgradeCheckSafeOnFixedVersion(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_5_24})
	m := c.AddMember(t, "m2", etcdtest.AddOptions{Learner: true})
	c.PromoteMember(t, m)
	eps := strings.Join(c.Endpoints(), ",")
	code, rep := upgradeCheck(t, "--to", "v3.6.16", "--endpoints", eps, "--fetch-backends")
	if code != exitOK || rep.Verdict != "SAFE" {
		t.Fatalf("v3.5.24 -> v3.6.16: exit %d %s %+v", code, rep.Verdict, rep.Findings)
	}
	code, rep = upgradeCheck(t, "--to", "v3.7.3", "--endpoints", eps, "--fetch-backends")
	if code != exitCritical || !hasUpgradeFinding(rep, upgrade.IDSkipsMinor) {
		t.Fatalf("v3.5 -> v3.7: exit %d %+v", code, rep.Findings)
	}
	if code, _, errOut := runCLI(t, "upgrade", "check", "--to", "banana", "--endpoints", eps); code != exitFailed || !strings.Contains(errOut, "--to") {
		t.Fatalf("bad --to: exit %d %s", code, errOut)
	}
}

// Incident 3 repaired: the v3.5.19 cluster whose promoted learners are still learners in its v3
// store follows etcdmedic's plan (v3.5.24, a restart of every member on it, then v3.6) and
// reaches v3.6 under write load with no acknowledged write lost.
func TestUpgradePlanTakesV3519ToV36Safely(t *testing.T) {
	t.Parallel()
	c := v3519WithPromotedLearners(t)
	for _, m := range c.Members() {
		killLocalMember(t, m.DataDir)
	}
	ledger := etcdtest.StartLoad(t.Context(), t, c.Client(t), etcdtest.LoadSpec{Rate: 30})
	waitAcked(t, ledger, 10)
	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	args, eps := upgradePlanArgs(t, c, planDir, backups, etcdtest.V3_5_24, etcdtest.V3_6)
	code, out, errOut := runCLI(t, args...)
	if code != exitOK || !strings.Contains(out, "HOP 2") || !strings.Contains(out, "check: BLOCKED") {
		t.Fatalf("upgrade plan: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "upgrade", "apply", planDir, "--yes", "-w", "json")
	if code != exitOK {
		t.Fatalf("upgrade apply: exit %d\n%s\n%s", code, out, errOut)
	}
	applyFollowedInJSON(t, out, errOut, "v3.6.16", "m1", "m2", "m3")
	code, rep := upgradeCheck(t, "--to", "v3.7.3", "--endpoints", strings.Join(eps, ","), "--fetch-backends")
	for _, m := range rep.Members {
		if m.Version != "3.6.16" || len(m.Drifts) != 0 {
			t.Errorf("%s after the upgrade: version %s, drifts %+v", m.Name, m.Version, m.Drifts)
		}
	}
	ledger.Stop()
	nothingLost(t, eps, ledger)
	t.Logf("v3.5.19 -> v3.5.24 -> restart -> v3.6.16 with %d acknowledged writes, none lost", len(ledger.Acked()))
}

// etcd #20793: a v3.5.19 cluster's members are replaced one by one by newer v3.5 learners. The
// new learner receives the v3.5.19 leader's backend in a raft snapshot, stale learner flags
// included, and keeps them although it runs v3.5.21. upgrade check must see it before v3.6.
func TestUpgradeCheckSeesStaleFlagsCarriedBySnapshots(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_5_19, SnapshotCount: 50,
		ExtraFlags: []string{"--experimental-snapshot-catchup-entries=10"}})
	for _, name := range []string{"m2", "m3"} {
		m := c.AddMember(t, name, etcdtest.AddOptions{Learner: true})
		c.PromoteMember(t, m)
	}
	cli := c.Client(t)
	for i := 0; i < 300; i++ { // past several snapshots: a new member can only catch up by one
		if _, err := cli.Put(t.Context(), fmt.Sprintf("k%03d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	c.RemoveMember(t, c.Member("m3"))
	m4 := c.AddMember(t, "m4", etcdtest.AddOptions{Learner: true, Version: etcdtest.V3_5_21})
	c.PromoteMember(t, m4)
	if !strings.Contains(m4.LogTail(2000), "snapshot") {
		t.Logf("m4's log does not mention a snapshot; it may have caught up from the log")
	}
	code, rep := upgradeCheck(t, "--to", "v3.6.16", "--endpoints", strings.Join(c.Endpoints(), ","), "--fetch-backends")
	var m4facts *upgrade.MemberFacts
	for i := range rep.Members {
		if rep.Members[i].Name == "m4" {
			m4facts = &rep.Members[i]
		}
	}
	if m4facts == nil || m4facts.Version != "3.5.21" || len(m4facts.Drifts) == 0 {
		t.Fatalf("want m4 (v3.5.21) to carry the stale flags it received: %+v", m4facts)
	}
	if code != exitCritical || !hasUpgradeFinding(rep, upgrade.IDMembershipDrift) {
		t.Fatalf("exit %d, findings %+v", code, rep.Findings)
	}
}

// A v3.6 cluster goes back to v3.5: downgrade enabled, storage version dropped, then each
// member restarted on v3.5.24, under write load, nothing lost.
func TestDowngradePlanFromV36ToV35(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, Version: etcdtest.V3_6})
	for _, m := range c.Members() {
		killLocalMember(t, m.DataDir)
	}
	ledger := etcdtest.StartLoad(t.Context(), t, c.Client(t), etcdtest.LoadSpec{Rate: 30})
	waitAcked(t, ledger, 10)
	planDir := filepath.Join(t.TempDir(), "plan")
	var eps []string
	args := []string{"upgrade", "plan", "--to", "v3.5.24", "--plan-dir", planDir, "--backup-dir", t.TempDir(),
		"--etcd-binary", "v3.5.24=" + etcdtest.Binary(t, etcdtest.V3_5_24).Path}
	for _, m := range c.Members() {
		eps = append(eps, m.ClientURL)
		args = append(args, "--data-dir", m.Name+"="+m.DataDir)
	}
	args = append(args, "--endpoints", strings.Join(eps, ","))
	if code, out, errOut := runCLI(t, args...); code != exitOK || !strings.Contains(out, "DOWNGRADE") || !strings.Contains(out, "downgrade enable 3.5") {
		t.Fatalf("downgrade plan: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut := runCLI(t, "upgrade", "apply", planDir, "--yes")
	if code != exitOK {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	// -w table: the steps for a person on stderr, the timings and the outcome on stdout.
	if !strings.Contains(errOut, "==> [2/") || !strings.Contains(out, "upgraded to v3.5.24") {
		t.Errorf("apply's table output:\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
	code, d := waitDoctor(t, eps, func(d doctorJSON) bool { return d.Quorum.VotersUp == 3 })
	for _, m := range d.Members {
		if m.Probe == nil || m.Probe.Status == nil || m.Probe.Status.Version != "3.5.24" {
			t.Errorf("%s after the downgrade: %+v (doctor exit %d)", m.Name, m.Probe, code)
		}
	}
	ledger.Stop()
	nothingLost(t, eps, ledger)
}

// applyFollowedInJSON checks upgrade apply -w json: its progress on stderr as JSON lines, each
// step's start an event naming its member, every member restarted on target; its result on
// stdout, one JSON document.
func applyFollowedInJSON(t *testing.T, out, errOut, target string, members ...string) {
	t.Helper()
	restarted := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
		var e progressEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Time.IsZero() || e.Event == "" || e.Message == "" {
			t.Fatalf("not a progress event (%v): %s", err, line)
		}
		if e.Event == string(upgrade.StepStarted) && strings.HasPrefix(e.Step, "hop") && e.Member == "" {
			t.Errorf("a hop's step without its member: %s", line)
		}
		if e.Event == string(upgrade.MemberRestarted) && strings.Contains(e.Message, target) {
			restarted[e.Member] = true
		}
	}
	var res upgradeApplyResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Report == nil || !res.Report.Upgraded || res.Report.Target != target || res.Error != "" {
		t.Fatalf("stdout is not apply's result (%v): %s", err, out)
	}
	for _, m := range members {
		if !restarted[m] {
			t.Errorf("no member-restarted event for %s on %s:\n%s", m, target, errOut)
		}
	}
}

// upgradePlanArgs is `upgrade plan` of c to v3.6.16 with the binaries of the versions given,
// and the cluster's client URLs.
func upgradePlanArgs(t *testing.T, c *etcdtest.Cluster, planDir, backups string, versions ...string) (args, eps []string) {
	args = []string{"upgrade", "plan", "--to", "v3.6.16", "--plan-dir", planDir, "--backup-dir", backups}
	for _, v := range versions {
		args = append(args, "--etcd-binary", v+"="+etcdtest.Binary(t, v).Path)
	}
	for _, m := range c.Members() {
		eps = append(eps, m.ClientURL)
		args = append(args, "--data-dir", m.Name+"="+m.DataDir)
	}
	return append(args, "--endpoints", strings.Join(eps, ",")), eps
}

// Review item 4: a member of a v3.5.24 cluster is down, so its v3 membership cannot be read,
// and the hops to v3.6 (v3.6.16 straight away: no restart hop) do nothing about it. upgrade
// plan refuses with exit 2, names the finding and its remedy, and writes nothing.
func TestUpgradePlanRefusesABlockedCheckItsHopsDoNotRouteAround(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, Version: etcdtest.V3_5_24})
	if err := c.Member("m3").Stop(); err != nil {
		t.Fatal(err)
	}
	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	args, _ := upgradePlanArgs(t, c, planDir, backups, etcdtest.V3_6)
	code, out, errOut := runCLI(t, args...)
	if code != exitCritical || !strings.Contains(errOut, upgrade.IDMembershipUnknown) || !strings.Contains(errOut, "Bring back any member that is down") || !strings.Contains(errOut, "nothing was written") {
		t.Fatalf("upgrade plan with m3 down: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(planDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused plan wrote its folder: %v", err)
	}
	if _, err := os.Stat(backups); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused plan wrote the backup folder: %v", err)
	}
}

// apply checks the plan's recorded check again before its first step: a plan made by an
// earlier etcdmedic for v2 custom keys (v3.6 refuses to start on them) is refused with exit 2,
// the finding and its remedy named, and no journal written.
func TestUpgradeApplyRefusesAPlanWhoseCheckIsBlocked(t *testing.T) {
	t.Parallel()
	planDir := filepath.Join(t.TempDir(), "plan")
	v2 := finding.Finding{ID: upgrade.IDV2CustomData, Severity: finding.Critical, Summary: "m1's v2 store holds 3 custom keys",
		Remedy: "Migrate or delete the v2 keys on v3.5; verify with etcdutl check v2store."}
	p := &upgrade.Plan{Version: 1, CreatedAt: time.Now().UTC(), From: "v3.5.24", Target: "v3.6.16",
		Members: []upgrade.Member{{Name: "m1", DataDir: filepath.Join(t.TempDir(), "m1"), PeerURLs: []string{"http://127.0.0.1:1"}, ClientURLs: []string{"http://127.0.0.1:2"}}},
		Hops:    []upgrade.Hop{{Version: "v3.6.16", Why: "the target"}}, Binaries: map[string]string{"v3.6.16": "/opt/etcd-3.6.16/etcd"},
		Check: &upgrade.Report{Verdict: "BLOCKED", Findings: []finding.Finding{v2}},
		Steps: []plan.Step{{ID: "snapshot", Kind: upgrade.StepSnapshot, Title: "snapshot"}}}
	if err := p.Save(planDir); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "upgrade", "apply", planDir, "--yes", "--command-timeout", "1s")
	if code != exitCritical || !strings.Contains(errOut, upgrade.IDV2CustomData) || !strings.Contains(errOut, "etcdutl check v2store") || strings.Contains(out, "upgraded") {
		t.Fatalf("apply of a blocked plan: exit %d\n%s\n%s", code, out, errOut)
	}
	if names := dirNames(t, planDir); !slices.Equal(names, []string{plan.File}) {
		t.Fatalf("a refused apply wrote into the plan folder: %v", names)
	}
}

// Review item 7: plan.json deleted, the old journal kept, and a new plan made into the same
// folder would have every step skipped as done, apply saying "upgraded". upgrade plan refuses
// the folder before it looks at the cluster, says to give a new --plan-dir, and leaves the
// journal as it was.
func TestUpgradePlanRefusesAFolderWithAJournal(t *testing.T) {
	t.Parallel()
	planDir := filepath.Join(t.TempDir(), "plan")
	if err := os.Mkdir(planDir, 0o700); err != nil {
		t.Fatal(err)
	}
	journal := `{"step":"snapshot","event":"done","at":"2026-12-01T03:00:00Z"}` + "\n" + `{"step":"hop0:m1","event":"done","at":"2026-12-01T03:01:00Z"}` + "\n"
	if err := os.WriteFile(filepath.Join(planDir, plan.JournalFile), []byte(journal), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "upgrade", "plan", "--to", "v3.6.16", "--plan-dir", planDir, "--backup-dir", t.TempDir(),
		"--etcd-binary", "v3.6.16=/opt/etcd-3.6.16/etcd", "--data-dir", "m1="+t.TempDir(), "--endpoints", "http://127.0.0.1:1", "--command-timeout", "1s")
	if code != exitFailed || !strings.Contains(errOut, "journal") || !strings.Contains(errOut, "new --plan-dir") {
		t.Fatalf("upgrade plan into a folder with a journal: exit %d\n%s\n%s", code, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(planDir, plan.JournalFile)); err != nil || string(b) != journal {
		t.Fatalf("the journal changed: %q, %v", b, err)
	}
	if names := dirNames(t, planDir); !slices.Equal(names, []string{plan.JournalFile}) {
		t.Fatalf("a refused plan wrote into the folder: %v", names)
	}
}

// Review finding 12: upgrade apply --help said that with -w json the events go to stdout; they
// go to stderr (as the README and applyFollowedInJSON say), the result alone to stdout.
func TestUpgradeApplyHelpSaysWhereTheEventsGo(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, "upgrade", "apply", "--help")
	help := strings.Join(strings.Fields(out), " ")
	if code != exitOK || !strings.Contains(help, "With -w json, stderr is JSON lines") || !strings.Contains(help, "stdout holds the result alone") {
		t.Fatalf("upgrade apply --help: exit %d\n%s\n%s", code, out, errOut)
	}
}
