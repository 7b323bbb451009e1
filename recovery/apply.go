package recovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/etcdmedic/etcdmedic"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/finding"
	"github.com/etcdmedic/etcdmedic/guard"
	"github.com/etcdmedic/etcdmedic/member"
	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/runlock"
	"github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/local"
	"github.com/etcdmedic/etcdmedic/runtime/runbook"
	"github.com/etcdmedic/etcdmedic/runtime/staticpod"
	"github.com/etcdmedic/etcdmedic/runtime/systemd"
)

// Applier carries out a plan.
type Applier struct {
	Plan *Plan
	Dir  string // the plan folder, holding the journal
	// Runtime runs the members that have no kubeadm manifest.
	Runtime local.Runtime
	Out     io.Writer
	Conn    cluster.Conn // TLS and timeouts; endpoints come from the plan
	Timeout time.Duration
	// Operator answers the checkpoints of runbook members (nil: the plan must have none).
	Operator *runbook.Operator

	background map[string]chan error // backups running while the survivor is rebuilt
	// survivorLoaded opens when the survivor's etcd has loaded its data: the background
	// backups wait for it. When Apply returns, the context the background copies run under is
	// cancelled (a copy not begun is not begun, the one running stops at its next stage), and
	// Apply waits for them (backgroundDone) before it releases its locks, so that nothing
	// writes after it returned, nor while another run holds the locks.
	survivorLoaded *gate
	backgroundDone chan struct{}
	// beforeBackgroundCopy, when set (by tests), is called as a background copy of m begins.
	beforeBackgroundCopy func(m PlanMember)
	// firstRunServing is when the survivor's first run alone, started by this process with
	// shortRunFlags, served its first write (zero: not started so by this process).
	firstRunServing time.Time
}

// Report is what apply did.
type Report struct {
	Timings     []plan.Timing     `json:"timings"`
	BackupDir   string            `json:"backupDir"`
	Quarantines []string          `json:"quarantines"`
	Findings    []finding.Finding `json:"findingsAfter"`
	Revision    int64             `json:"revisionAfter"`
	Hashes      map[string]uint32 `json:"hashes"`
	Took        time.Duration     `json:"tookNs"`
}

// ErrStale means reality no longer matches the plan; the step that found it changed nothing.
var ErrStale = errors.New("the plan no longer matches the cluster")

// Apply runs the plan's steps, skipping the ones the journal says are done.
func (a *Applier) Apply(ctx context.Context) (*Report, error) {
	started := time.Now()
	a.Out = &syncWriter{w: a.Out} // background backups report while steps run
	a.survivorLoaded = newGate()
	for _, m := range a.Plan.Members {
		if m.Runbook != "" && a.Operator == nil {
			return nil, fmt.Errorf("%s is on the runbook: apply needs an operator to confirm its checkpoints", m.Name)
		}
	}
	ctx, finish, err := a.exclusive(ctx)
	if err != nil {
		return nil, err
	}
	defer finish()
	j, err := plan.OpenJournal(a.Dir)
	if err != nil {
		return nil, err
	}
	if j.Empty() {
		if err := a.checkReality(ctx); err != nil {
			return nil, err
		}
	} else {
		// A resumed run: the survivor's data dir may have been swapped or remounted since.
		if err := a.survivorAsPlanned(j); err != nil {
			return nil, err
		}
		if _, done := j.Done(string(StepBackup)); done {
			// The survivor has changed since its backup: that backup is the only copy of its
			// data as it was, and must still be there.
			if err := verifyBackup(filepath.Join(a.Plan.BackupDir, a.Plan.Survivor)); err != nil {
				return nil, fmt.Errorf("%w: the survivor's backup in %s is gone or damaged (%v): put it back before going on; nothing was changed", ErrStale, filepath.Join(a.Plan.BackupDir, a.Plan.Survivor), err)
			}
		}
		if err := a.restartAfterReboot(ctx, j); err != nil {
			return nil, err
		}
	}
	if a.Timeout == 0 {
		a.Timeout = 2 * time.Minute
	}
	rep := &Report{BackupDir: a.Plan.BackupDir, Quarantines: []string{}, Hashes: map[string]uint32{}}
	ex := &plan.Executor{Journal: j, Out: a.Out}
	rep.Timings, err = ex.Run(ctx, a.Plan.Steps, func(ctx context.Context, s plan.Step) error {
		return a.run(ctx, s, rep)
	})
	rep.Took = time.Since(started)
	return rep, err
}

// exclusive takes the run locks on the plan folder and every member's data dir: two applies
// of one plan would interleave the journal and remove each other's backups mid-copy. It
// returns the context the run goes on under, and finish, which Apply defers: it cancels that
// context (the background copies stop), waits until every background copy has ended, and only
// then releases the locks.
func (a *Applier) exclusive(ctx context.Context) (context.Context, func(), error) {
	targets := []string{a.Dir}
	for _, m := range a.Plan.Members {
		targets = append(targets, m.DataDir)
	}
	release, err := runlock.AcquireAll(targets, "recover apply")
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	finish := func() {
		cancel()
		if a.survivorLoaded != nil {
			a.survivorLoaded.open() // a plan without a rebuild step, or a failed run
		}
		if a.backgroundDone != nil {
			<-a.backgroundDone
		}
		release()
	}
	return ctx, finish, nil
}

// checkReality refuses a plan made for a cluster that has changed since: another cluster's
// data, a survivor with less history than planned, or quorum back.
func (a *Applier) checkReality(ctx context.Context) error {
	p := a.Plan
	for _, m := range p.Members {
		if m.Manifest != "" {
			if err := (staticpod.Runtime{Manifest: m.Manifest}).Check(m.DataDir); err != nil {
				return fmt.Errorf("%w: %v", ErrStale, err)
			}
		}
		r, err := datadir.Inspect(m.DataDir, datadir.Options{WALDir: m.WALDir})
		if errors.Is(err, datadir.ErrLocked) {
			continue // running without quorum: stop-all stops it
		}
		if err != nil || r.Identity == nil {
			if m.Name == p.Survivor {
				return fmt.Errorf("%w: the survivor's data dir %s cannot be read now: %v", ErrStale, m.DataDir, err)
			}
			continue // a wiped member
		}
		if r.Identity.ClusterID != p.ClusterID {
			return fmt.Errorf("%w: %s now holds data of cluster %s, the plan is for %s", ErrStale, m.DataDir, r.Identity.ClusterID, p.ClusterID)
		}
		if m.Name == p.Survivor && r.Backend != nil {
			if kept := max(r.Raft.LastIndex, r.Raft.HardState.Commit, r.Backend.ConsistentIndex); kept < p.Committed {
				return fmt.Errorf("%w: the survivor %s now has less history (index %d) than when the plan was made (%d)", ErrStale, m.Name, kept, p.Committed)
			}
		}
	}
	return a.requireQuorumLost(ctx)
}

// requireQuorumLost proves, before a destructive step, that quorum is still lost, with the
// plan's connection settings; a member that cannot be shown down makes the step refuse.
func (a *Applier) requireQuorumLost(ctx context.Context) error {
	var targets []quorumTarget
	for _, m := range a.Plan.Members {
		dir := m.DataDir
		if m.Runbook != "" {
			dir = "" // on its own node
		}
		targets = append(targets, quorumTarget{Name: m.Name, DataDir: dir, ClientURLs: m.ClientURLs, PeerURLs: m.PeerURLs,
			Voter: m.Standing == StandingVoter || m.Standing == "", Down: slices.Contains(a.Plan.DeclaredDown, m.Name)})
	}
	if _, err := checkQuorumLost(ctx, a.conn(), targets, nil); err != nil {
		return fmt.Errorf("%w: %w", ErrStale, err)
	}
	return nil
}

// othersStopped proves by their data dirs' locks that no local member other than a survivor
// already started alone runs: whatever runtime stopped them, and whatever started one again.
func (a *Applier) othersStopped() error {
	for _, m := range a.Plan.Members {
		if m.Runbook != "" {
			continue // its node is the operator's; its checkpoint was checked over the etcd API
		}
		if m.Name == a.Plan.Survivor && runsForced(m) {
			continue
		}
		if err := local.VerifyStopped(m.DataDir); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
	}
	return nil
}

// conn reaches every member of the plan.
func (a *Applier) conn() cluster.Conn {
	var eps []string
	for _, m := range a.Plan.Members {
		eps = append(eps, m.ClientURLs...)
	}
	return a.Plan.Connection.with(a.Conn).To(eps)
}

func (a *Applier) spec(m PlanMember, extra ...string) runtime.MemberSpec {
	if m.WALDir != "" {
		extra = append([]string{"--wal-dir=" + m.WALDir}, extra...)
	}
	return runtime.MemberSpec{
		Name: m.Name, DataDir: m.DataDir, ClientURLs: m.ClientURLs, PeerURLs: m.PeerURLs,
		InitialCluster: initialClusterOf(m), ClusterState: "new", ExtraFlags: append(append([]string{}, a.Plan.EtcdFlags...), extra...),
	}
}

func initialClusterOf(m PlanMember) string {
	var parts []string
	for _, u := range m.PeerURLs {
		parts = append(parts, m.Name+"="+u)
	}
	return strings.Join(parts, ",")
}

// runtimeFor is how member m is stopped and started: its static pod, the operator following a
// printed runbook, or a local process.
func (a *Applier) runtimeFor(m PlanMember) runtime.Runtime {
	switch {
	case m.Manifest != "":
		return staticpod.Runtime{Manifest: m.Manifest, Wait: a.Timeout}
	case m.Runbook != "":
		return runbook.Runtime{Node: m.Name, Style: m.Runbook, Operator: a.Operator, EtcdCommand: strings.Join(a.Plan.EtcdCommand, " "),
			Conn: a.conn(), Wait: a.Timeout}
	case m.SystemdUnit != "":
		return systemd.Runtime{Unit: m.SystemdUnit, Then: a.Runtime}
	}
	return a.Runtime
}

// forceOffline leaves a local survivor alone while it is stopped: its whole log committed,
// then the configuration changes --force-new-cluster would make appended to its WAL
// (forceAlone). It then starts without --force-new-cluster: no flag that a supervisor could
// apply again later. Its first run alone gets shortRunFlags when the plan restarts it clean
// afterwards. A rerun finds it started (it serves writes: an old member short of quorum never
// answers) or finishes the offline part.
func (a *Applier) forceOffline(ctx context.Context, survivor PlanMember) error {
	if running, _ := inFirstRun(survivor); running {
		// Started by an earlier run of this step (restart-clean restarts its first run with the
		// member's own settings), or by someone else: its flags prove nothing (a tuned member
		// may run with the first run's timing).
		if err := a.waitWrites(ctx, survivor); err != nil {
			return fmt.Errorf("%s runs, but not as the one-member cluster this step makes (started by a supervisor before it was left alone?): stop it and apply again: %w", survivor.Name, err)
		}
		// Serving writes proves a quorum, not that it is this step's one-member cluster: the
		// old cluster, restarted whole by a supervisor etcdmedic does not know, serves too.
		if err := a.requireAlone(ctx, survivor); err != nil {
			return err
		}
		a.say("%s already runs alone and serves writes (started by an earlier run of this step)", survivor.Name)
		return nil
	}
	if from, where, err := cutInvalidTail(survivor.DataDir, survivor.WALDir); err != nil {
		return fmt.Errorf("cut %s's invalid WAL tail: %w", survivor.Name, err)
	} else if from > 0 {
		a.say("%s's WAL cut before entry %d, not a raft log from there (%s; kept in its backup)", survivor.Name, from, where)
	}
	before, after, err := commitWholeLog(survivor.DataDir, survivor.WALDir)
	if err != nil {
		return fmt.Errorf("commit %s's whole log: %w", survivor.Name, err)
	}
	if after > before {
		a.say("%s's whole log committed: commit index %d -> %d (%d entries kept that --force-new-cluster alone would drop)", survivor.Name, before, after, after-before)
	}
	removed, err := forceAlone(survivor.DataDir, survivor.WALDir)
	if err != nil {
		return fmt.Errorf("leave %s alone: %w", survivor.Name, err)
	}
	if len(removed) > 0 {
		a.say("%s left alone offline: removals of %v appended to its WAL and committed (what --force-new-cluster does at start)", survivor.Name, removed)
	}
	plan.Crashpoint("force-new-cluster:alone")
	short := a.Plan.firstRunFlags()
	spec := a.spec(survivor, short...)
	spec.ClusterState = "existing"
	if err := a.runtimeFor(survivor).Start(ctx, spec); err != nil {
		return err
	}
	plan.Crashpoint("force-new-cluster:started")
	if err := a.waitWrites(ctx, survivor); err != nil {
		return err
	}
	if len(short) > 0 {
		a.firstRunServing = time.Now()
	}
	return nil
}

// forceByFlag starts a survivor on another node (the operator follows a runbook) with
// --force-new-cluster; restart-clean takes the flag off.
func (a *Applier) forceByFlag(ctx context.Context, survivor PlanMember) error {
	if a.servesWrites(ctx, survivor) {
		a.say("%s already serves writes (started at an earlier checkpoint)", survivor.Name)
	} else if err := a.runtimeFor(survivor).Start(ctx, a.spec(survivor, forcedRunFlags...)); err != nil {
		return err
	}
	return a.waitWrites(ctx, survivor)
}

func (a *Applier) say(format string, args ...any) {
	fmt.Fprintf(a.Out, "    "+format+"\n", args...)
}

func (a *Applier) run(ctx context.Context, s plan.Step, rep *Report) error {
	p := a.Plan
	survivor := p.Member(p.Survivor)
	switch s.Kind {
	case StepForceNewCluster, StepRestoreSnapshot:
		if running, _ := inFirstRun(survivor); running {
			break // a rerun: this step already started the survivor alone
		}
		if err := a.othersStopped(); err != nil {
			return err
		}
		// The last moment before the survivor's data changes, with every member stopped: a
		// survivor already changed by an interrupted run of this step is not read (see
		// othersUnchangedSincePlan).
		if err := a.othersUnchangedSincePlan(); err != nil {
			return err
		}
		fallthrough
	case StepStopAll:
		// Destructive: quorum must still be lost, proven now, not when the plan was made.
		if err := a.requireQuorumLost(ctx); err != nil {
			return err
		}
	}
	switch s.Kind {
	case StepStopAll:
		for _, m := range p.Members {
			if err := stoppingQuorumLost(a.runtimeFor(m)).Stop(ctx, a.spec(m)); err != nil {
				return fmt.Errorf("stop %s: %w", m.Name, err)
			}
		}
		return a.othersStopped()
	case StepBackup:
		return a.backupFirst(ctx)
	case StepForceNewCluster, StepRestoreSnapshot:
		defer a.survivorLoaded.open()
		wctx, stopWatching := context.WithCancel(ctx)
		defer stopWatching()
		go a.watchSurvivorLoaded(wctx, survivor)
		switch {
		case s.Kind == StepRestoreSnapshot:
			return a.restoreSnapshot(ctx, survivor, rep)
		case survivor.Runbook != "":
			return a.forceByFlag(ctx, survivor)
		}
		return a.forceOffline(ctx, survivor)
	case StepRemoveLeftovers:
		return a.removeLeftovers(ctx, survivor)
	case StepRestartClean:
		rt := a.runtimeFor(survivor)
		if survivor.Runbook != "" {
			// The operator restarts it: stop (checked: no answer), start without the flag.
			if err := rt.Stop(ctx, a.spec(survivor)); err != nil {
				return err
			}
		} else if _, first := inFirstRun(survivor); first {
			if err := a.letClientsBack(ctx, survivor); err != nil {
				return err
			}
			// etcdmedic started the first run as a local process (a systemd unit stays stopped).
			if err := a.stoppingFirstRun(ctx, survivor).Stop(ctx, a.spec(survivor)); err != nil {
				return err
			}
			plan.Crashpoint("restart-clean:stopped")
		}
		if running, _ := inFirstRun(survivor); !running {
			// Existing, not new: whatever runs this manifest later must not bootstrap.
			spec := a.spec(survivor)
			spec.ClusterState = "existing"
			if err := rt.Start(ctx, spec); err != nil {
				return err
			}
		}
		return a.waitWrites(ctx, survivor)
	case StepRejoin:
		return a.rejoin(ctx, p.Member(s.Member), rep)
	case StepVerify:
		return a.verify(ctx, rep)
	}
	return fmt.Errorf("unknown step %q", s.ID)
}

// backupOne copies one data dir into <backup>/<name>/data with a manifest, verified; a copy
// already verified is kept as it is, and so is one plan took while it watched the member
// stopped, as long as the data dir still holds exactly the files it copied, unchanged.
func (a *Applier) backupOne(ctx context.Context, m PlanMember, workers int) error {
	if m.Runbook != "" {
		if _, err := os.Stat(m.DataDir); err != nil {
			return a.operatorBackup(m)
		}
	}
	final := filepath.Join(a.Plan.BackupDir, m.Name)
	if current(final, m.DataDir) {
		a.say("%s: backup taken by plan, and its data dir is unchanged since (every file's size and modification time)", m.Name)
		return nil
	}
	if err := verifyBackup(final); err == nil {
		a.say("%s: backup already there and verified", m.Name)
		return nil
	}
	if _, err := os.Stat(final); err == nil {
		return fmt.Errorf("backup %s exists but does not verify: move it aside and apply again", final)
	}
	man, err := copyMember(ctx, m, final+".partial", workers)
	if err != nil {
		return err
	}
	if err := os.Rename(final+".partial", final); err != nil {
		return err
	}
	a.say("%s: %d files, %d bytes backed up and verified in %s", m.Name, len(man.Files), man.Bytes, final)
	return backup.SyncDir(a.Plan.BackupDir)
}

type backupManifest struct {
	Member string           `json:"member"`
	Source string           `json:"source"`
	Files  []backup.FileSum `json:"files"`
	// WALSource is the member's WAL dir when it lives apart (--wal-dir): copied into wal/,
	// its files in WALFiles.
	WALSource string           `json:"walSource,omitempty"`
	WALFiles  []backup.FileSum `json:"walFiles,omitempty"`
	Bytes     int64            `json:"bytes"`
	At        time.Time        `json:"at"`
	// Links are the symlinks of the data dir (a WAL on its own disk): the copy holds their
	// targets' files in place of them, and these say how the layout was.
	Links []backup.Link `json:"links,omitempty"`
	// StaticPod is the member's kubeadm manifest as it was, copied to static-pod/ beside data/.
	StaticPod []backup.FileSum `json:"staticPod,omitempty"`
	// TakenBy is set when the operator archived the data dir on its node (a runbook member):
	// then Files is empty and the archive is there, not here.
	TakenBy string `json:"takenBy,omitempty"`
}

func verifyBackup(dir string) error {
	var man backupManifest
	if err := backup.ReadJSON(filepath.Join(dir, "manifest.json"), &man); err != nil {
		return err
	}
	if err := backup.Verify(filepath.Join(dir, "data"), man.Files); err != nil {
		return err
	}
	if man.WALSource != "" {
		if err := backup.Verify(filepath.Join(dir, "wal"), man.WALFiles); err != nil {
			return err
		}
	}
	if len(man.StaticPod) > 0 {
		return backup.Verify(filepath.Join(dir, "static-pod"), man.StaticPod)
	}
	return nil
}

// backupStaticPod copies the manifest (wherever it is now: in kubelet's folder, or set aside by
// an earlier stop) into <into>/static-pod/, with its checksum.
func backupStaticPod(manifest, into string) ([]backup.FileSum, error) {
	src := manifest
	if _, err := os.Stat(src); err != nil {
		src = staticpod.Runtime{Manifest: manifest}.StoppedPath()
	}
	dir := filepath.Join(into, "static-pod")
	if err := backup.MkdirAllSynced(dir); err != nil {
		return nil, err
	}
	if err := backup.CopyFile(src, filepath.Join(dir, filepath.Base(manifest)), 0o600); err != nil {
		return nil, fmt.Errorf("back up the manifest %s: %w", manifest, err)
	}
	sums, _, err := backup.Checksum(dir, nil)
	return sums, err
}

// VerifyBackups checks every member's backup of a plan against its manifest.
func VerifyBackups(p *Plan) error {
	for _, m := range p.Members {
		if err := verifyBackup(filepath.Join(p.BackupDir, m.Name)); err != nil {
			return fmt.Errorf("backup of %s: %w", m.Name, err)
		}
	}
	return nil
}

func (a *Applier) client(endpoints []string) (*clientv3.Client, error) {
	c := a.conn()
	c.Endpoints = endpoints
	return c.Client()
}

// waitWrites waits until the member commits a write: a forced or restarted survivor is up.
func (a *Applier) waitWrites(ctx context.Context, m PlanMember) error {
	cli, err := a.client(m.ClientURLs)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, a.Timeout)
	defer cancel()
	var last error
	for {
		wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
		_, last = cli.Put(wctx, "etcdmedic/recovery", time.Now().UTC().Format(time.RFC3339Nano))
		wcancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s does not serve writes after %s: %v (its log: %s)", m.Name, a.Timeout, last, local.LogFile(m.DataDir))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (a *Applier) removeLeftovers(ctx context.Context, survivor PlanMember) error {
	cli, err := a.client(survivor.ClientURLs)
	if err != nil {
		return err
	}
	defer cli.Close()
	list, err := cli.MemberList(ctx)
	if err != nil {
		return err
	}
	self := list.Header.MemberId
	for _, m := range list.Members {
		if m.ID == self {
			continue
		}
		a.say("removing leftover member %s (%x, learner %v)", m.Name, m.ID, m.IsLearner)
		if err := member.Remove(ctx, cli, etcdmedic.ID(m.ID)); err != nil {
			return err
		}
	}
	return nil
}

func (a *Applier) rejoin(ctx context.Context, m PlanMember, rep *Report) error {
	if err := a.ensureBackup(ctx, m); err != nil {
		return err
	}
	if m.KubeadmJoin {
		return a.rejoinByKubeadm(ctx, m, rep)
	}
	var eps []string
	for _, o := range a.Plan.Members {
		if o.Name != m.Name {
			eps = append(eps, o.ClientURLs...)
		}
	}
	cli, err := a.client(eps)
	if err != nil {
		return err
	}
	defer cli.Close()
	rt := a.runtimeFor(m)
	switch live, err := addedMember(ctx, cli, m.PeerURLs); {
	case err != nil:
		return err
	case live != nil && !live.IsLearner && live.Name != "":
		a.say("%s already rejoined and was promoted (by a run interrupted before it could record it)", m.Name)
		return nil
	case live != nil && m.Runbook == "" && local.VerifyStopped(m.DataDir) != nil:
		// Started as a learner by a run interrupted while it caught up: its data dir is the new
		// member's, not old data. Go on from there.
		a.say("%s runs as the learner an interrupted run started: waiting for it to catch up", m.Name)
		rt = alreadyStarted{rt}
	case m.Runbook != "":
		if err := a.operatorQuarantine(m, rep); err != nil {
			return err
		}
	default:
		if err := a.quarantineOld(m, rep); err != nil {
			return err
		}
	}
	j := &member.Joiner{Client: cli, Runtime: crashpointAfterStart{rt, plan.StepID(StepRejoin, m.Name) + ":started"}, Out: a.Out, CatchUp: a.Timeout}
	flags := slices.Clone(a.Plan.EtcdFlags)
	if m.WALDir != "" {
		flags = append(flags, "--wal-dir="+m.WALDir) // its WAL stays on its own disk
	}
	_, err = j.Join(ctx, member.JoinSpec{Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, DataDir: m.DataDir, ExtraFlags: flags})
	return err
}

// addedMember is the member of the rebuilt cluster with these peer URLs (added by this
// recovery: the forced survivor was left alone), or nil.
func addedMember(ctx context.Context, cli *clientv3.Client, peerURLs []string) (*etcdserverpb.Member, error) {
	list, err := cli.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("member list: %w", err)
	}
	for _, m := range list.Members {
		if slices.ContainsFunc(m.PeerURLs, func(u string) bool { return slices.Contains(peerURLs, u) }) {
			return m, nil
		}
	}
	return nil, nil
}

// alreadyStarted is a runtime whose member runs already: Start has nothing to do.
type alreadyStarted struct{ runtime.Runtime }

func (alreadyStarted) Start(context.Context, runtime.MemberSpec) error { return nil }

// crashpointAfterStart lets the crash tests interrupt a rejoin right after the member started,
// while it catches up as a learner.
type crashpointAfterStart struct {
	runtime.Runtime
	point string
}

func (c crashpointAfterStart) Start(ctx context.Context, m runtime.MemberSpec) error {
	if err := c.Runtime.Start(ctx, m); err != nil {
		return err
	}
	plan.Crashpoint(c.point)
	return nil
}

// quarantineOld moves a rejoining member's old data aside (never deleted), unless there is
// none. Data that cannot be read is moved only when the plan says the operator accepted it.
func (a *Applier) quarantineOld(m PlanMember, rep *Report) error {
	if err := local.VerifyStopped(m.DataDir); err != nil {
		return fmt.Errorf("%s is running on its old data dir: %w", m.Name, err)
	}
	// First: a quarantine an interrupted run began may have moved some of the files (the WAL
	// half apart, or everything), and the data dir would read as half a member or as wiped.
	if err := a.finishQuarantine(m, rep); err != nil {
		return err
	}
	if err := dataDirPresent(m.DataDir); errors.Is(err, fs.ErrNotExist) {
		if !walLeft(m.WALDir) {
			return nil // wiped: nothing to keep
		}
		// Its data dir is gone but its WAL dir apart is not: started with it, the new member
		// would replay the old log. The WAL half is quarantined like any other.
		if err := os.MkdirAll(m.DataDir, 0o700); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	r, err := datadir.Inspect(m.DataDir, datadir.Options{WALDir: m.WALDir})
	switch {
	case err == nil && r.Kind == datadir.KindEmpty:
		return nil // wiped: nothing to keep
	case err == nil && r.Kind == datadir.KindWALWithoutData:
		// Only its WAL is left (see above): moved aside, with its checksums.
	case err != nil || (r.Kind != datadir.KindEtcdMember && r.Kind != datadir.KindPDMember):
		if !m.DiscardUnreadable {
			return fmt.Errorf("%s's data dir %s cannot be read (%v): it is not moved aside without --discard-unreadable %s in the plan", m.Name, m.DataDir, err, m.Name)
		}
		if r == nil {
			r = &datadir.Report{Path: m.DataDir, Kind: "unreadable", KindReason: fmt.Sprint(err)}
		}
	}
	why := guard.Reason{Class: guard.Removed, Why: "left behind by a quorum-loss recovery: the member rejoins the rebuilt cluster with an empty data dir"}
	// The backup just summed these files: unchanged since, they need not be read again.
	var man backupManifest
	backup.ReadJSON(filepath.Join(a.Plan.BackupDir, m.Name, "manifest.json"), &man)
	q, err := guard.QuarantineKnown(m.DataDir, r, why, time.Now(), man.Files, filepath.Join(a.Plan.BackupDir, m.Name))
	if err != nil {
		return err
	}
	a.say("%s's old data quarantined in %s", m.Name, q.Dir)
	if q.WALDir != "" {
		a.say("%s's old WAL (apart from its data dir) quarantined in %s", m.Name, q.WALDir)
	}
	rep.Quarantines = append(rep.Quarantines, q.Dir)
	return nil
}

// finishQuarantine finishes the quarantine of m's old data that an interrupted run began (its
// manifest written), if there is one; a data dir that is not there has none.
func (a *Applier) finishQuarantine(m PlanMember, rep *Report) error {
	if dataDirPresent(m.DataDir) != nil {
		return nil
	}
	partial, err := guard.Unfinished(m.DataDir)
	if err != nil {
		return fmt.Errorf("look for an unfinished quarantine of %s's data dir %s: %w", m.Name, m.DataDir, err)
	}
	if partial == "" {
		return nil
	}
	q, err := guard.Finish(m.DataDir, time.Now())
	if err != nil {
		return fmt.Errorf("finish the quarantine of %s's old data that an interrupted run began (its files are in %s or still in %s): %w", m.Name, partial, m.DataDir, err)
	}
	a.say("%s's old data: the quarantine an interrupted run began is finished in %s", m.Name, q.Dir)
	if q.WALDir != "" {
		a.say("%s's old WAL (apart from its data dir) quarantined in %s", m.Name, q.WALDir)
	}
	rep.Quarantines = append(rep.Quarantines, q.Dir)
	return nil
}

// verify waits until doctor is clean, then checks that every member hashes the same data at
// one revision, and that no revision the survivor had is missing.
func (a *Applier) verify(ctx context.Context, rep *Report) error {
	said := ""
	notYet := func(j finding.Judged) {
		if why := fmt.Sprintf("%d of %d voters up, hashes agree: %v, findings %v", j.View.Quorum.VotersUp, len(a.Plan.Members), hashesAgree(j.View), ids(j.Findings)); why != said {
			a.say("not yet: %s", why)
			said = why
		}
	}
	opts := finding.AwaitOptions{Probe: cluster.ProbeOptions{Discover: true, CheckHash: true}, Timeout: a.Timeout, Between: notYet}
	j, err := finding.Await(ctx, a.conn(), opts, func(j finding.Judged) bool {
		q := j.View.Quorum
		return !j.Critical() && q.VotersUp == len(a.Plan.Members) && q.Voters == len(a.Plan.Members) && hashesAgree(j.View)
	})
	v := j.View
	rep.Findings = j.Findings
	if errors.Is(err, finding.ErrNotSettled) {
		return fmt.Errorf("after %s: %d of %d voters up, findings %v", a.Timeout, v.Quorum.VotersUp, len(a.Plan.Members), ids(rep.Findings))
	}
	if err != nil {
		return err
	}
	for _, m := range v.Members {
		if m.Up() {
			if m.Probe.Hash != nil {
				rep.Hashes[m.Name] = m.Probe.Hash.Hash
			}
			rep.Revision = max(rep.Revision, m.Probe.Status.Revision)
		}
	}
	if rep.Revision < a.Plan.Revision {
		return fmt.Errorf("the cluster is at revision %d, behind the survivor's %d", rep.Revision, a.Plan.Revision)
	}
	return nil
}

func hashesAgree(v *cluster.View) bool {
	var first *uint32
	for _, m := range v.Members {
		if !m.Up() || m.IsLearner {
			continue
		}
		if m.Probe.Hash == nil || m.Probe.Hash.Error != "" {
			return false
		}
		if first == nil {
			h := m.Probe.Hash.Hash
			first = &h
		} else if *first != m.Probe.Hash.Hash {
			return false
		}
	}
	return first != nil
}

func ids(fs []finding.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.ID+"("+f.Subject+")")
	}
	return out
}

// syncWriter serialises writes from the steps and the background backups.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// dataDirPresent is nil for a data dir that is there, fs.ErrNotExist for one that is not (a
// wiped member), and an error for a link whose target is missing (a disk not mounted), which
// must never pass for "wiped".
func dataDirPresent(dir string) error {
	if _, err := os.Lstat(dir); err != nil {
		return err
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s is a link to a folder that does not exist (a disk not mounted?): %w", dir, backup.ErrDanglingLink)
	} else if err != nil {
		return err
	}
	return nil
}

// walLeft reports whether a WAL dir apart holds anything.
func walLeft(walDir string) bool {
	if walDir == "" {
		return false
	}
	ents, err := os.ReadDir(walDir)
	return err == nil && len(ents) > 0
}
