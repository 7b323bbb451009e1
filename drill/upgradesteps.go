package drill

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic/sandbox"
)

// plannedUpgrade upgrades the sandbox with etcdmedic upgrade plan and apply, as an operator
// would run them: each member backed up, then restarted one at a time on v3.5.24 (which
// rewrites the membership records) and on v3.6, the leader last.
func (r *recorder) plannedUpgrade(ctx context.Context, env Env, sb *sandbox.Sandbox, bins map[string]string, eps string) error {
	r.repair = time.Now()
	planDir, backups := filepath.Join(env.Dir, "plan"), filepath.Join(env.Dir, "backups")
	args := []string{"upgrade", "plan", "--to", upgradeTo, "--plan-dir", planDir, "--backup-dir", backups, "--endpoints", eps,
		"--etcd-binary", upgradeRepair + "=" + bins[upgradeRepair], "--etcd-binary", upgradeTo + "=" + bins[upgradeTo]}
	for _, m := range sb.Members {
		args = append(args, "--data-dir", m.Name+"="+m.DataDir)
	}
	out, err := r.etcdmedic(ctx, env, args...)
	if err != nil {
		return err
	}
	r.say("etcdmedic upgrade plan --to %s: %d hops, plan in %s", upgradeTo, strings.Count(out, "HOP "), planDir)
	r.say("etcdmedic upgrade apply %s --yes:", planDir)
	if _, err := r.etcdmedic(ctx, env, "upgrade", "apply", planDir, "--yes"); err != nil {
		return err
	}
	versions, err := memberVersions(ctx, sb)
	if err != nil {
		return err
	}
	r.result.Repair = "etcdmedic upgrade plan + apply"
	r.result.RepairSec = time.Since(r.repair).Seconds()
	r.say("upgraded: %s", versions)
	if strings.Count(versions, strings.TrimPrefix(upgradeTo, "v")) != len(sb.Members) {
		return fmt.Errorf("after upgrade apply, not every member runs %s: %s", upgradeTo, versions)
	}
	return nil
}

// memberVersions lists each member's etcd version, as it answers.
func memberVersions(ctx context.Context, sb *sandbox.Sandbox) (string, error) {
	cli, err := sb.Client()
	if err != nil {
		return "", err
	}
	defer cli.Close()
	var parts []string
	for _, m := range sb.Members {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, m.ClientURL)
		cancel()
		if err != nil {
			parts = append(parts, m.Name+" not answering")
			continue
		}
		parts = append(parts, m.Name+" "+st.Version)
	}
	return strings.Join(parts, ", "), nil
}

// naiveUpgrade is the upgrade by hand that incident 3's operators ran: stop a member, swap its
// binary for v3.6, start it. On drifted membership the member exits at bootstrap; the drill
// says why, then puts the member back on its old binary, whole.
func (r *recorder) naiveUpgrade(ctx context.Context, sb *sandbox.Sandbox, bins map[string]string) error {
	r.repair = time.Now()
	m := sb.Members[len(sb.Members)-1]
	if err := sb.StopMember(m.Name, 10*time.Second); err != nil {
		return err
	}
	logStart := fileSize(m.LogFile)
	if err := sb.StartMemberOn(m.Name, []string{bins[upgradeTo]}); err != nil {
		return err
	}
	r.say("--naive: %s stopped and started in place on etcd %s (its binary swapped, as a rolling upgrade by hand does)", m.Name, upgradeTo)
	fatal, err := waitExit(ctx, sb, m.Name, logStart, 30*time.Second)
	if err != nil {
		return err
	}
	r.result.NaiveFailure = fatal
	r.say("%s on %s exited: %s", m.Name, upgradeTo, fatal)
	r.say("the in-place upgrade failed: the cluster runs on %d of %d members, and upgrading the next one would lose quorum", len(sb.Members)-1, len(sb.Members))
	if err := sb.StartMemberOn(m.Name, []string{bins[upgradeFrom]}); err != nil {
		return err
	}
	if err := sb.WaitReady(ctx, 30*time.Second); err != nil {
		return err
	}
	r.result.Repair = "none (--naive: the in-place upgrade, shown failing)"
	r.result.RepairSec = time.Since(r.repair).Seconds()
	r.say("%s back on %s: the cluster whole again, nothing upgraded (etcdmedic upgrade plan and apply do it: run the drill without --naive)", m.Name, upgradeFrom)
	return nil
}

// waitExit waits for the member's process to exit and returns the fatal error its log shows
// after offset. A member still running after timeout means the naive upgrade did not fail.
func waitExit(ctx context.Context, sb *sandbox.Sandbox, name string, offset int64, timeout time.Duration) (string, error) {
	m, err := sb.Member(name)
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(timeout)
	for !m.Exited() { // just started: Running's check of its command line may not see it yet
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", fmt.Errorf("%s kept running on %s for %s: the naive upgrade did not fail (log: %s)", name, upgradeTo, timeout, m.LogFile)
		}
		time.Sleep(200 * time.Millisecond)
	}
	sb.StopMember(name, 0) // forget the pid
	return fatalIn(m.LogFile, offset), nil
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// fatalIn returns the message and error of the first fatal or panic line of an etcd log
// after offset.
func fatalIn(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "its log cannot be read: " + err.Error()
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return err.Error()
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		var line struct{ Level, Msg, Error string }
		if json.Unmarshal(sc.Bytes(), &line) != nil || (line.Level != "fatal" && line.Level != "panic") {
			continue
		}
		if line.Error != "" {
			return line.Msg + ": " + line.Error
		}
		return line.Msg
	}
	return "no fatal line in its log (" + path + ")"
}
