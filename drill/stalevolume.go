package drill

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/guard"
	"github.com/etcdmedic/etcdmedic/member"
	"github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/local"
	"github.com/etcdmedic/etcdmedic/sandbox"
)

// staleVolume is incident 1: a member is failed over (removed), and its replacement starts on
// a volume that still holds the old data. Without etcdmedic it never becomes healthy; guard
// quarantines the old data and the member rejoins fresh.
func staleVolume(ctx context.Context, env Env, r *recorder) error {
	rt := local.Runtime{Command: env.Command}
	sb, err := sandbox.Up(ctx, sandbox.Options{Dir: filepath.Join(env.Dir, "sandbox"), Members: 3, Command: env.Command})
	var onVolume []runtime.MemberSpec // the member that ends up running on the volume
	if sb != nil {
		defer func() { r.stopAll(sb, rt, onVolume...) }()
	}
	if err != nil {
		return err
	}
	r.say("3-member cluster up (%s)", sb.Dir)
	if err := r.startKubernetes(ctx, env, sb); err != nil {
		return err
	}
	cli, err := r.startLoad(ctx, sb)
	if err != nil {
		return err
	}
	defer cli.Close()
	time.Sleep(2 * time.Second)

	m3, _ := sb.Member("m3")
	if err := sb.StopMember("m3", 10*time.Second); err != nil {
		return err
	}
	// The workload runs from the failover on, as the cluster's clients do: the stale member's
	// crash and the repair happen under it. (Started before, its watch streams on m3 would
	// hold m3's graceful stop for etcd's 7 s.)
	w, err := r.startWorkload(ctx, sb)
	if err != nil {
		return err
	}
	defer w.Abandon() // a drill that failed early: the judge stopped it otherwise
	volume := filepath.Join(env.Dir, "pv-0007")
	files, _, err := backup.Checksum(m3.DataDir, nil)
	if err != nil {
		return err
	}
	if err := backup.CopyTree(m3.DataDir, volume, files); err != nil {
		return err
	}
	list, err := cli.MemberList(ctx)
	if err != nil {
		return err
	}
	for _, m := range list.Members {
		if m.Name == "m3" {
			if err := member.Remove(ctx, cli, etcdmedic.ID(m.ID)); err != nil {
				return err
			}
		}
	}
	r.say("m3 failed over: removed from the cluster; its old data dir left on volume %s", volume)

	spec := runtime.MemberSpec{Name: "m3", DataDir: volume, ClientURLs: []string{m3.ClientURL}, PeerURLs: []string{m3.PeerURL}, InitialCluster: "m3=" + m3.PeerURL, ClusterState: "existing"}
	onVolume = append(onVolume, spec)
	if err := rt.Start(ctx, spec); err != nil {
		return err
	}
	r.say("replacement m3 started on the reused volume")
	// It fails as removed once it has replayed its log and heard from the cluster.
	var logText []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if logText, _ = os.ReadFile(local.LogFile(volume)); strings.Contains(string(logText), "removed") {
			break
		}
	}
	rt.Stop(ctx, spec)
	if !strings.Contains(string(logText), "removed") {
		return fmt.Errorf("the stale member did not fail as removed; see %s", local.LogFile(volume))
	}
	r.say("without etcdmedic: it exits, \"the member has been permanently removed from the cluster\" (crash loop)")
	time.Sleep(time.Second) // the workload's baseline before the repair

	r.repair = time.Now()
	conn := cluster.DefaultConn()
	conn.Endpoints, conn.CommandTimeout = sb.Endpoints(), 2*time.Second
	rep, err := datadir.Inspect(volume, datadir.Options{})
	if err != nil {
		return err
	}
	view := cluster.Observe(ctx, conn)
	verdict := guard.Classify(rep, view, guard.Expect{Name: "m3", PeerURLs: spec.PeerURLs})
	r.say("etcdmedic guard: %s: %s", verdict.Class, verdict.Reason)
	q, err := guard.Quarantine(volume, rep, verdict, time.Now())
	if err != nil {
		return err
	}
	r.say("guard --fix: %d files quarantined in %s (checksummed, nothing deleted)", q.Files, q.Dir)
	j := &member.Joiner{Client: cli, Runtime: rt, Out: &timeline{r: r}, CatchUp: time.Minute}
	joined, err := j.Join(ctx, member.JoinSpec{Name: "m3", PeerURLs: spec.PeerURLs, ClientURLs: spec.ClientURLs, DataDir: volume})
	if err != nil {
		return err
	}
	r.result.Repair = "etcdmedic guard --fix --rejoin --start"
	r.result.RepairSec = time.Since(r.repair).Seconds()
	r.say("guard --rejoin: m3 joined as learner %s, caught up, promoted", joined.MemberID)
	if err := guard.Verify(q.Dir); err != nil {
		return fmt.Errorf("quarantine does not verify: %w", err)
	}
	r.say("quarantine verified against its manifest")
	w.RunUntil(ctx, MinOperations, 2*time.Second, minOperationsWithin) // the workload goes on against the repaired cluster
	if err := r.judge(ctx, w, sb.Endpoints()); err != nil {
		return err
	}
	return r.count(ctx, sb.Endpoints())
}
