package upgrade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/finding"
	"github.com/etcdmedic/etcdmedic/member"
	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// Applier carries out an upgrade plan through the local process runtime.
type Applier struct {
	Plan *Plan
	Dir  string
	Conn cluster.Conn // TLS and timeouts; endpoints come from the plan
	// Progress receives each event as it happens (nil: none is reported).
	Progress func(Event)
	Timeout  time.Duration
	// Now is the clock of the step timings (nil: time.Now).
	Now func() time.Time
}

// Applied is what one run of apply did.
type Applied struct {
	From   string `json:"from"`
	Target string `json:"target"`
	// Upgraded: every step of the plan is done, every member runs the target.
	Upgraded bool          `json:"upgraded"`
	Timings  []plan.Timing `json:"timings"`
}

// Event is one thing apply does, reported as it happens.
type Event struct {
	Kind EventKind
	// Step is the plan step it belongs to ("": before the steps).
	Step string
	// Member is the member it is about ("": the cluster).
	Member  string
	Message string // one line for the operator
}

// EventKind says what happened. The values are stable: programs read them (upgrade apply -w json).
type EventKind string

const (
	StepSkipped   EventKind = "step-skipped" // done in an earlier run
	StepStarted   EventKind = "step-started"
	StepFinished  EventKind = "step-finished"
	StepFailed    EventKind = "step-failed"
	SnapshotSaved EventKind = "snapshot-saved"
	LeaderMoved   EventKind = "leader-moved"
	// MemberRestarted: the member serves on the hop's version and the cluster is healthy.
	MemberRestarted EventKind = "member-restarted"
	// MemberStartedAgain: found down before the steps (a reboot), started on the version it was on.
	MemberStartedAgain EventKind = "member-started-again"
)

// Apply runs the plan's steps, skipping those the journal says are done. What it did is
// returned also when it fails. A plan whose recorded check holds a critical finding its hops
// do not route around (one made by an earlier etcdmedic) is refused before anything is
// started, stopped or journaled (ErrBlocked).
func (a *Applier) Apply(ctx context.Context) (*Applied, error) {
	if a.Timeout == 0 {
		a.Timeout = 2 * time.Minute
	}
	res := &Applied{From: a.Plan.From, Target: a.Plan.Target, Timings: []plan.Timing{}}
	if err := a.Plan.blocked(); err != nil {
		return res, err
	}
	j, err := plan.OpenJournal(a.Dir)
	if err != nil {
		return res, err
	}
	if err := a.restartAfterReboot(ctx, j); err != nil {
		return res, err
	}
	// The executor's own lines are text for a terminal: apply reports its steps as events.
	ex := &plan.Executor{Journal: j, Out: io.Discard, Now: a.Now}
	timings, err := ex.Run(ctx, a.Plan.Steps, a.reportSteps(j))
	res.Timings = append(res.Timings, timings...)
	res.Upgraded = err == nil
	return res, err
}

func (a *Applier) report(e Event) {
	if a.Progress != nil {
		a.Progress(e)
	}
}

func (a *Applier) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// reportSteps reports the steps done in an earlier run as skipped, now (the executor stops at
// the first failure, so they come first), and wraps run to report each other step as it
// starts and ends.
func (a *Applier) reportSteps(j *plan.Journal) func(context.Context, plan.Step) error {
	steps := a.Plan.Steps
	interrupted := map[string]bool{}
	for i, s := range steps {
		if at, done := j.Done(s.ID); done {
			a.report(Event{Kind: StepSkipped, Step: s.ID, Member: s.Member,
				Message: fmt.Sprintf("[%d/%d] %s: done at %s, skipping", i+1, len(steps), s.Title, at.Format(time.RFC3339))})
		} else if _, started := j.StartedAt(s.ID); started {
			interrupted[s.ID] = true
		}
	}
	return func(ctx context.Context, s plan.Step) error {
		n := fmt.Sprintf("[%d/%d]", slices.IndexFunc(steps, func(o plan.Step) bool { return o.ID == s.ID })+1, len(steps))
		resumed := ""
		if interrupted[s.ID] {
			resumed = " (resuming: it was interrupted)"
		}
		a.report(Event{Kind: StepStarted, Step: s.ID, Member: s.Member, Message: n + " " + s.Title + resumed})
		began := a.now()
		if err := a.run(ctx, s); err != nil {
			a.report(Event{Kind: StepFailed, Step: s.ID, Member: s.Member, Message: n + " " + err.Error()})
			return err
		}
		a.report(Event{Kind: StepFinished, Step: s.ID, Member: s.Member, Message: fmt.Sprintf("%s done in %s", n, a.now().Sub(began).Round(10*time.Millisecond))})
		return nil
	}
}

// conn reaches every member of the plan.
func (a *Applier) conn() cluster.Conn {
	var eps []string
	for _, m := range a.Plan.Members {
		eps = append(eps, m.ClientURLs...)
	}
	return a.Conn.To(eps)
}

func (a *Applier) run(ctx context.Context, s plan.Step) error {
	switch s.Kind {
	case StepSnapshot:
		v := cluster.Observe(ctx, a.conn())
		b, err := member.SaveSnapshot(ctx, a.conn(), v, a.Plan.BackupDir, nil)
		if err == nil {
			a.report(Event{Kind: SnapshotSaved, Step: s.ID, Message: fmt.Sprintf("%s (%d bytes, sha256 %s)", b.Path, b.Bytes, b.SHA256)})
		}
		return err
	case StepDowngradeEnable:
		return a.enableDowngrade(ctx)
	case StepHop:
		if s.Stage >= len(a.Plan.Hops) {
			return fmt.Errorf("unknown step %q", s.ID)
		}
		return a.restart(ctx, s.ID, a.Plan.member(s.Member), a.Plan.Hops[s.Stage])
	case StepCheck:
		return a.check(ctx, s.Stage)
	}
	return fmt.Errorf("unknown step %q", s.ID)
}

func (a *Applier) spec(m Member) runtime.MemberSpec {
	var parts []string
	for _, o := range a.Plan.Members {
		for _, u := range o.PeerURLs {
			parts = append(parts, o.Name+"="+u)
		}
	}
	return runtime.MemberSpec{Name: m.Name, DataDir: m.DataDir, ClientURLs: m.ClientURLs, PeerURLs: m.PeerURLs,
		InitialCluster: strings.Join(parts, ","), ClusterState: "existing", ExtraFlags: flagsFor(m, a.Plan.EtcdFlags)}
}

// restart waits until the cluster can spare m, moves leadership away from m if it leads, stops
// it, starts it on the hop's binary, and waits until it serves on that version and the cluster
// is healthy. Until the cluster can spare m, nothing is stopped.
func (a *Applier) restart(ctx context.Context, step string, m Member, hop Hop) error {
	cli, err := a.conn().Client()
	if err != nil {
		return fmt.Errorf("reach the cluster before restarting %s (nothing was stopped): %w", m.Name, err)
	}
	defer cli.Close()
	nudge := nudger(ctx, cli)
	v, err := a.awaitSpare(ctx, m, nudge)
	if err != nil {
		return err
	}
	if err := a.moveLeaderAway(ctx, step, m, v); err != nil {
		return err
	}
	rt := local.Runtime{Command: []string{a.Plan.Binaries[hop.Version]}, Env: a.Plan.PassEnv}
	spec := a.spec(m)
	if err := rt.Stop(ctx, spec); err != nil {
		return err
	}
	if err := rt.Start(ctx, spec); err != nil {
		return err
	}
	return a.awaitRestarted(ctx, step, m, hop, nudge)
}

// nudger writes between looks: a restarted member reports no leader until something commits.
func nudger(ctx context.Context, cli *clientv3.Client) func(finding.Judged) {
	return func(finding.Judged) {
		nctx, cancel := context.WithTimeout(ctx, time.Second)
		cli.Put(nctx, "etcdmedic/upgrade-nudge", time.Now().UTC().Format(time.RFC3339Nano))
		cancel()
	}
}

// spareWait bounds how long a hop step waits for the cluster to be able to spare its member:
// long enough for the member restarted by the step before to serve again, short enough to
// tell the operator soon that another member is down.
const spareWait = 30 * time.Second

// awaitSpare waits until the cluster can spare m (canSpare), and returns the view that says so;
// past spareWait (or the step timeout, if shorter) it returns why it cannot.
func (a *Applier) awaitSpare(ctx context.Context, m Member, nudge func(finding.Judged)) (*cluster.View, error) {
	opts := finding.AwaitOptions{Probe: cluster.ProbeOptions{Discover: true}, Timeout: min(a.Timeout, spareWait), Interval: 300 * time.Millisecond, Between: nudge}
	j, err := finding.Await(ctx, a.conn(), opts, func(j finding.Judged) bool {
		return canSpare(j.View, a.Plan.Members, m.Name) == nil
	})
	if err != nil && !errors.Is(err, finding.ErrNotSettled) {
		return nil, fmt.Errorf("wait until the cluster can spare %s (nothing was stopped): %w", m.Name, err)
	}
	if err := canSpare(j.View, a.Plan.Members, m.Name); err != nil {
		return nil, err
	}
	return j.View, nil
}

// awaitRestarted waits until m serves on the hop's version and the cluster is healthy.
func (a *Applier) awaitRestarted(ctx context.Context, step string, m Member, hop Hop, nudge func(finding.Judged)) error {
	want := strings.TrimPrefix(hop.Version, "v")
	opts := finding.AwaitOptions{Probe: cluster.ProbeOptions{Discover: true}, Timeout: a.Timeout, Interval: 300 * time.Millisecond, Between: nudge}
	_, err := finding.Await(ctx, a.conn(), opts, func(j finding.Judged) bool {
		mv := j.View.ByName(m.Name)
		return mv != nil && mv.Up() && mv.Probe.Status.Version == want && !j.Critical() && len(j.View.Leaders) == 1
	})
	if errors.Is(err, finding.ErrNotSettled) {
		return fmt.Errorf("%s did not come back healthy on %s within %s (its log: %s)", m.Name, hop.Version, a.Timeout, local.LogFile(m.DataDir))
	}
	if err != nil {
		return err
	}
	a.report(Event{Kind: MemberRestarted, Step: step, Member: m.Name, Message: fmt.Sprintf("%s serves on %s, the cluster healthy", m.Name, hop.Version)})
	return nil
}

// moveLeaderAway hands leadership to another serving voter when m leads in v (the view that
// found the cluster can spare m), so that its restart causes no election.
func (a *Applier) moveLeaderAway(ctx context.Context, step string, m Member, v *cluster.View) error {
	leader := v.MemberByID(v.Leader())
	if leader == nil || leader.Name != m.Name || len(v.Members) < 2 {
		return nil
	}
	for _, o := range v.Members {
		if o.Name == m.Name || o.IsLearner || !serving(o) {
			continue
		}
		cli, err := a.Conn.ClientFor(leader.Probe.Endpoint)
		if err != nil {
			return err
		}
		defer cli.Close()
		mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := cli.MoveLeader(mctx, uint64(o.ID)); err != nil {
			return fmt.Errorf("move leadership from %s to %s: %w", m.Name, o.Name, err)
		}
		a.report(Event{Kind: LeaderMoved, Step: step, Member: m.Name, Message: fmt.Sprintf("leadership moved from %s to %s", m.Name, o.Name)})
		return nil
	}
	return nil
}

// check verifies the cluster after a hop: healthy, and no member's v3 records disagree with
// raft (each member's db fetched through the snapshot API).
func (a *Applier) check(ctx context.Context, hop int) error {
	v := cluster.Observe(ctx, a.conn())
	if err := wholeCluster(v, a.Plan.Members); err != nil {
		return fmt.Errorf("after hop %d the cluster is not healthy: %w", hop+1, err)
	}
	if fs := finding.ForCluster(v, finding.DefaultClusterRules()); finding.Worst(fs) == finding.Critical {
		return fmt.Errorf("after hop %d the cluster is not healthy: %s", hop+1, fs[0].Summary)
	}
	if !driftMatters(a.Plan, hop) {
		return nil
	}
	for _, m := range v.Members {
		if !m.Up() || m.IsLearner {
			continue
		}
		drift, err := fetchDrift(ctx, a.Conn, m.Probe.Endpoint)
		if err != nil {
			return fmt.Errorf("read %s's membership: %w", m.Name, err)
		}
		for _, d := range drift {
			if d.Field == "isLearner" || d.Field == "presence" {
				return fmt.Errorf("after hop %d, %s's v3 record of %s still disagrees with raft (%s): stopping before the next hop", hop+1, m.Name, d.MemberID, d.Field)
			}
		}
	}
	return nil
}

// fetchDrift reads one member's db through the snapshot API and returns its membership drift.
func fetchDrift(ctx context.Context, conn cluster.Conn, endpoint string) ([]datadir.Drift, error) {
	r, err := fetchReport(ctx, conn, endpoint)
	if err != nil {
		return nil, err
	}
	if r.Membership == nil {
		return nil, fmt.Errorf("no membership in the db of %s: %s", endpoint, r.MembershipError)
	}
	return r.Membership.Drifts(), nil
}

// driftMatters says whether membership drift must be gone after hop: before a hop to another
// minor version, and at the end of an upgrade (from v3.6 on, the v3 records are the
// membership). Within v3.5 it may not be gone yet: a member upgraded early
// republished its record while later ones still ran the old version and skipped the rewrite,
// and only the next full restart repairs that; a v3.5 patch upgrade (v3.5.15 to v3.5.24, say)
// ends with no such restart, and its drift is for the plan to v3.6 to route around, so it does
// not fail an upgrade that went through.
func driftMatters(p *Plan, hop int) bool {
	if hop+1 < len(p.Hops) {
		return !sameMinor(p.Hops[hop].Version, p.Hops[hop+1].Version)
	}
	return !(sameMinor(p.From, p.Target) && sameMinor(p.Target, "v3.5.0"))
}

func sameMinor(a, b string) bool {
	va, errA := ParseVersion(a)
	vb, errB := ParseVersion(b)
	return errA == nil && errB == nil && va.Major == vb.Major && va.Minor == vb.Minor
}

// enableDowngrade validates and enables the downgrade (once), then waits until every member's
// storage version has dropped to the target: only then does the older binary accept the data.
func (a *Applier) enableDowngrade(ctx context.Context) error {
	target := a.Plan.Downgrade
	cli, err := a.conn().Client()
	if err != nil {
		return err
	}
	defer cli.Close()
	v := cluster.Observe(ctx, a.conn())
	if !storageAt(v, target) {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		// A downgrade job in progress is this plan's, enabled by a run that was interrupted
		// before the storage version dropped: etcd refuses to validate or enable it again.
		_, err := cli.Downgrade(dctx, clientv3.DowngradeValidate, target)
		if err != nil && !errors.Is(err, rpctypes.ErrDowngradeInProcess) {
			return fmt.Errorf("downgrade validate %s: %w", target, err)
		}
		if err == nil {
			if _, err := cli.Downgrade(dctx, clientv3.DowngradeEnable, target); err != nil && !errors.Is(err, rpctypes.ErrDowngradeInProcess) {
				return fmt.Errorf("downgrade enable %s: %w", target, err)
			}
		}
	}
	return waitStorageAt(ctx, target, a.Timeout, func(ctx context.Context) *cluster.View { return cluster.Observe(ctx, a.conn()) })
}

// waitStorageAt asks observe every 500 ms until every member answers with storage version
// target.x, timeout has passed, or ctx ends (SIGINT, SIGTERM: the wait stops at once).
func waitStorageAt(ctx context.Context, target string, timeout time.Duration, observe func(context.Context) *cluster.View) error {
	deadline := time.Now().Add(timeout)
	for {
		if storageAt(observe(ctx), target) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("waiting for the storage version to drop to %s: %w", target, context.Cause(ctx))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the storage version did not drop to %s within %s", target, timeout)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// storageAt reports whether every member answers with storage version target.x.
func storageAt(v *cluster.View, target string) bool {
	if len(v.Members) == 0 {
		return false
	}
	for _, m := range v.Members {
		if !m.Up() || !strings.HasPrefix(m.Probe.Status.StorageVersion, target+".") {
			return false
		}
	}
	return true
}

// flagsFor are the extra flags m restarts with: the plan's, and its --wal-dir when its WAL
// lives apart.
func flagsFor(m Member, flags []string) []string {
	if m.WALDir == "" {
		return flags
	}
	return append([]string{"--wal-dir=" + m.WALDir}, flags...)
}
