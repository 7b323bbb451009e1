package recovery

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-semver/semver"

	"github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// shortRunFlags start the survivor's first run alone, which restart-clean ends. Alone, it is a
// one-member cluster, so it elects itself at once: a 100 ms election timeout instead of the
// usual 1 s (etcd fast-forwards the first election only for a member whose stored membership
// has one member, and a survivor left alone still stores the old one until it has applied the
// removals). Neither outlives the first run: restart-clean stops it before any member rejoins
// and starts it with the member's own settings. (No --snapshot-count=1000 here, unlike the
// runbook's forced run: the snapshot it takes makes every rejoin a snapshot transfer, and a
// learner's first publish lost inside one waited out etcd's 7 s publish timeout in verify.)
var shortRunFlags = []string{"--heartbeat-interval=10", "--election-timeout=100"}

// forcedRunFlags start the survivor's short --force-new-cluster run on another node (the
// operator follows a runbook): shortRunFlags, and a snapshot once it has applied 1,000 entries
// past the last one, so that the clean restart the operator makes then replays the WAL from
// there rather than from the previous snapshot (10 s of a 1 GiB member's restart).
var forcedRunFlags = []string{"--force-new-cluster", "--heartbeat-interval=10", "--election-timeout=100", "--snapshot-count=1000"}

// shortFirstRun reports whether a survivor that etcdmedic starts itself, as a local process,
// gets shortRunFlags for its first run. Not when the operator passes any of their variables:
// etcd refuses to start with a flag and its variable both set. Static pods keep their
// manifest's settings: kubelet would take one more restart of its own to take them off.
func shortFirstRun(sv PlanMember, passEnv []string) bool {
	if sv.Manifest != "" || sv.Runbook != "" {
		return false
	}
	return runtime.Conflicts(passEnv, shortRunFlags) == nil
}

// firstRunFlags are the flags the survivor's first run after forceOffline gets: shortRunFlags
// when it may have them and the plan restarts it clean afterwards. (Older plans had a
// restart-clean step for every survivor, static pods and passed variables included.)
func (p *Plan) firstRunFlags() []string {
	if !shortFirstRun(p.Member(p.Survivor), p.PassEnv) {
		return nil
	}
	for _, s := range p.Steps {
		if s.Kind == StepRestartClean {
			return shortRunFlags
		}
	}
	return nil
}

// inFirstRun reports whether m runs, and whether as the recovery's first run alone: with
// --force-new-cluster, or with every one of shortRunFlags.
func inFirstRun(m PlanMember) (running, first bool) {
	args, running := localArgs(m)
	if !running {
		return false, false
	}
	if local.HasFlag(args, "--force-new-cluster") {
		return true, true
	}
	for _, f := range shortRunFlags {
		if !slices.Contains(args, f) {
			return true, false
		}
	}
	return true, true
}

// runsForced reports whether m runs with --force-new-cluster: alone, whatever else it runs
// with (shortRunFlags alone could be a tuned member's own settings).
func runsForced(m PlanMember) bool {
	args, running := localArgs(m)
	return running && local.HasFlag(args, "--force-new-cluster")
}

// localArgs returns the command line of m's running etcd, if it runs here. A runbook member's
// process is on another node: it does not, and the step asks the operator (who sees it).
func localArgs(m PlanMember) (args []string, running bool) {
	if m.Runbook != "" {
		return nil, false
	}
	_, args, running = local.FindProcess(m.DataDir)
	return args, running
}

// FirstRunServes is how long the survivor's first run alone serves before restart-clean
// restarts it, counted from its first write. Clients come back late: a request sent while the
// cluster was down waits out its own timeout (2 s in bench/recover's workload), or a gRPC
// reconnection, before the client sends the next. A restart before they are back would add
// its own outage to theirs; 3 s lets most of them write first.
const FirstRunServes = 3 * time.Second

// letClientsBack waits, before the first run's restart, until it has served FirstRunServes
// (when this process started it and saw its first write).
func (a *Applier) letClientsBack(ctx context.Context, survivor PlanMember) error {
	wait := time.Until(a.firstRunServing.Add(FirstRunServes))
	if a.firstRunServing.IsZero() || wait <= 0 {
		return nil
	}
	a.say("%s serves alone; restarting it with its own settings in %s, once clients have found it up", survivor.Name, wait.Round(100*time.Millisecond))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}

// stoppingFirstRun is how restart-clean stops the survivor's first run: as the local process
// etcdmedic started it as, killed FirstRunStopGrace after SIGTERM when its etcd acknowledges a
// write alone only once its WAL holds it, else given etcd's whole graceful stop.
func (a *Applier) stoppingFirstRun(ctx context.Context, m PlanMember) runtime.Runtime {
	rt := a.Runtime
	if rt.Grace == 0 && a.durableAlone(ctx, m) {
		rt.Grace = FirstRunStopGrace
	}
	return rt
}

// durableAlone asks m's running etcd its version (see durableSingleMemberAcks); false when it
// cannot tell.
func (a *Applier) durableAlone(ctx context.Context, m PlanMember) bool {
	cli, err := a.client(m.ClientURLs)
	if err != nil {
		return false
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := cli.Status(sctx, m.ClientURLs[0])
	return err == nil && durableSingleMemberAcks(st.Version)
}

// durableSingleMemberAcks reports whether etcd of version v, as a one-member cluster,
// acknowledges a write only once its WAL holds it on disk: v3.5.5 and later, v3.4.21 and
// later in 3.4 (etcd #14370: earlier, a kill could lose an acknowledged write).
func durableSingleMemberAcks(v string) bool {
	ver, err := semver.NewVersion(strings.TrimPrefix(v, "v"))
	if err != nil || ver.Major != 3 {
		return err == nil && ver.Major > 3
	}
	switch ver.Minor {
	case 4:
		return ver.Patch >= 21
	case 5:
		return ver.Patch >= 5
	}
	return ver.Minor > 5
}
