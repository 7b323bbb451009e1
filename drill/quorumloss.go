package drill

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/recovery"
	"github.com/etcdmedic/etcdmedic/runtime/local"
	"github.com/etcdmedic/etcdmedic/sandbox"
)

// quorumLoss is incident 2: three members under write load; one is wiped (its data dir
// emptied, as the operator of the incident did), then a second is lost. etcdmedic recover
// rebuilds the cluster from the best survivor.
func quorumLoss(ctx context.Context, env Env, r *recorder) error {
	rt := local.Runtime{Command: env.Command}
	sb, err := sandbox.Up(ctx, sandbox.Options{Dir: filepath.Join(env.Dir, "sandbox"), Members: 3, Command: env.Command})
	if sb != nil {
		defer r.stopAll(sb, rt)
	}
	if err != nil {
		return err
	}
	r.say("3-member cluster up (%s)", sb.Dir)
	if err := r.startKubernetes(ctx, env, sb); err != nil {
		return err
	}
	cli, w, err := r.underLoad(ctx, sb)
	if err != nil {
		return err
	}
	defer cli.Close()
	defer w.Abandon() // a drill that failed early: the judge stopped it otherwise
	time.Sleep(2 * time.Second)
	m3, _ := sb.Member("m3")
	sb.KillMember("m3")
	if err := os.RemoveAll(m3.DataDir); err != nil {
		return err
	}
	r.say("m3 killed and its data dir wiped")
	time.Sleep(time.Second)
	sb.KillMember("m2")
	r.say("m2 killed: 1 of 3 voters left, quorum lost, writes refused")
	time.Sleep(time.Second)

	if err := r.recoverQuorum(ctx, env, sb, rt); err != nil {
		return err
	}
	w.RunUntil(ctx, MinOperations, 2*time.Second, minOperationsWithin) // the workload goes on against the repaired cluster
	if err := r.judge(ctx, w, sb.Endpoints()); err != nil {
		return err
	}
	return r.count(ctx, sb.Endpoints())
}

// recoverQuorum repairs a sandbox whose quorum is lost with etcdmedic recover plan and apply,
// as an operator would run them, and times it.
func (r *recorder) recoverQuorum(ctx context.Context, env Env, sb *sandbox.Sandbox, rt local.Runtime) error {
	r.repair = time.Now()
	conn := cluster.DefaultConn()
	conn.Endpoints, conn.CommandTimeout = sb.Endpoints(), 2*time.Second
	var members []recovery.MemberInput
	for _, m := range sb.Members {
		members = append(members, recovery.MemberInput{Name: m.Name, DataDir: m.DataDir})
	}
	backups := filepath.Join(env.Dir, "backups")
	a, err := recovery.Assess(ctx, members, recovery.AssessOptions{Conn: conn, Stopper: recovery.Stopper(recovery.PlanOptions{}, rt), BackupDir: backups})
	if err != nil {
		return err
	}
	p, err := recovery.NewPlan(a, recovery.PlanOptions{BackupDir: backups, EtcdCommand: env.Command}, time.Now())
	if err != nil {
		return err
	}
	planDir := filepath.Join(env.Dir, "plan")
	if err := p.Save(planDir); err != nil {
		return err
	}
	r.say("etcdmedic recover plan: survivor %s (commit %d, revision %d), plan in %s", p.Survivor, p.Committed, p.Revision, planDir)
	ap := &recovery.Applier{Plan: p, Dir: planDir, Runtime: rt, Out: &timeline{r: r}, Conn: conn, Timeout: time.Minute}
	rep, err := ap.Apply(ctx)
	if err != nil {
		return fmt.Errorf("recover apply: %w", err)
	}
	for _, t := range rep.Timings {
		r.say("  step %-22s %5.1fs", t.Step, t.Duration.Seconds())
	}
	r.result.Repair = "etcdmedic recover plan + apply"
	r.result.RepairSec = time.Since(r.repair).Seconds()
	r.say("recovered: 3 voters up, hashes equal at revision %d, backups in %s", rep.Revision, rep.BackupDir)
	return nil
}
