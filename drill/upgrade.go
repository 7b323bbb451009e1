package drill

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic/runtime/local"
	"github.com/etcdmedic/etcdmedic/sandbox"
)

// The versions of incident 3: the cluster is built on the last v3.5 that loses learner flags,
// repaired on a v3.5 that rewrites them, and upgraded to v3.6.
const (
	upgradeFrom   = "v3.5.19"
	upgradeRepair = "v3.5.24"
	upgradeTo     = "v3.6.16"
)

// upgradeDrill is incident 3: a v3.5.19 cluster grown the way kubeadm and operators grow one
// (each new member added as a learner, then promoted) keeps the promoted members marked as
// learners in its v3 store. Under the workload, etcdmedic upgrade check finds the drift, and
// upgrade plan and apply take the cluster through v3.5.24 to v3.6 one member at a time. With
// Env.Naive, the operator's in-place upgrade is run instead and shown failing.
func upgradeDrill(ctx context.Context, env Env, r *recorder) error {
	bins, err := r.etcdBinaries(ctx, upgradeFrom, upgradeRepair, upgradeTo)
	if err != nil {
		return err
	}
	sb, err := sandbox.Up(ctx, sandbox.Options{Dir: filepath.Join(env.Dir, "sandbox"), Members: 1, Command: []string{bins[upgradeFrom]}})
	if sb != nil {
		defer r.stopAll(sb, local.Runtime{Command: []string{bins[upgradeFrom]}})
	}
	if err != nil {
		return err
	}
	r.say("1-member cluster of etcd %s up (%s)", upgradeFrom, sb.Dir)
	if err := growByLearners(ctx, sb, r, 2); err != nil {
		return err
	}
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
	eps := strings.Join(sb.Endpoints(), ",")
	if err := r.upgradeCheck(ctx, env, eps); err != nil {
		return err
	}
	if env.Naive {
		err = r.naiveUpgrade(ctx, sb, bins)
	} else {
		err = r.plannedUpgrade(ctx, env, sb, bins, eps)
	}
	if err != nil {
		return err
	}
	w.RunUntil(ctx, MinOperations, 2*time.Second, minOperationsWithin) // the workload goes on against the upgraded cluster
	if err := r.judge(ctx, w, sb.Endpoints()); err != nil {
		return err
	}
	return r.count(ctx, sb.Endpoints())
}

// growByLearners adds n members one at a time, each as a learner promoted once it caught up.
func growByLearners(ctx context.Context, sb *sandbox.Sandbox, r *recorder, n int) error {
	for i := 0; i < n; i++ {
		m, err := sb.AddMember(ctx, true)
		if err != nil {
			return err
		}
		if err := sb.Promote(ctx, m.Name, 2*time.Minute); err != nil {
			return fmt.Errorf("promote %s: %w", m.Name, err)
		}
		r.say("%s added as a learner and promoted (%s keeps it a learner in its v3 store: etcd #19557)", m.Name, upgradeFrom)
	}
	return sb.WaitReady(ctx, 30*time.Second)
}

// upgradeCheck runs etcdmedic upgrade check with each member's db fetched, and says what it found.
func (r *recorder) upgradeCheck(ctx context.Context, env Env, eps string) error {
	rep, err := r.upgradeReport(ctx, env, "upgrade", "check", "--to", upgradeTo, "--endpoints", eps, "--fetch-backends")
	if err != nil {
		return err
	}
	var drifted []string
	for _, m := range rep.Members {
		if len(m.Drifts) > 0 {
			drifted = append(drifted, m.Name)
		}
	}
	r.say("etcdmedic upgrade check --to %s: %s; membership drift on %s; path %s", upgradeTo, rep.Verdict, orNone(drifted), strings.Join(rep.Path, " -> "))
	if rep.Verdict != "BLOCKED" || len(drifted) == 0 {
		return fmt.Errorf("upgrade check should block the upgrade for the drift, said %s (drift on %s)", rep.Verdict, orNone(drifted))
	}
	return nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "no member"
	}
	return strings.Join(names, ", ")
}
