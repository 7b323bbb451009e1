package member

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/types"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/finding"
	"github.com/etcdmedic/etcdmedic/guard"
)

// Replacer replaces a failed member: checks, a checksummed snapshot, remove, guard the new data
// dir, join as a learner, promote, verify.
type Replacer struct {
	Conn      cluster.Conn
	Client    *clientv3.Client
	Joiner    *Joiner
	Out       io.Writer
	BackupDir string
	DryRun    bool
	Now       func() time.Time
}

// Replaced says what Replace did.
type Replaced struct {
	Plan        []string           `json:"plan"`
	Backup      *Backup            `json:"backup,omitempty"`
	RemovedID   etcdmedic.ID       `json:"removedID,omitempty"`
	Quarantined *guard.Quarantined `json:"quarantined,omitempty"`
	Joined      *Joined            `json:"joined,omitempty"`
	Findings    []finding.Finding  `json:"findingsAfter"`
}

// Backup is a snapshot of the cluster's data taken before a membership change.
type Backup struct {
	Path     string `json:"path"`
	Bytes    int64  `json:"bytes"`
	SHA256   string `json:"sha256"`
	Revision int64  `json:"revision"`
	From     string `json:"from"`
}

// Replace replaces the member named (or with hex ID) old by spec.
func (r *Replacer) Replace(ctx context.Context, old string, spec JoinSpec) (*Replaced, error) {
	out := &Replaced{Findings: []finding.Finding{}}
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	v := cluster.ObserveElected(ctx, r.Conn)
	target, started, err := r.precheck(ctx, v, old, spec)
	if err != nil {
		return nil, err
	}
	out.Plan = r.plan(target, spec, started)
	for i, p := range out.Plan {
		r.say("step %d/%d: %s", i+1, len(out.Plan), p)
	}
	if r.DryRun {
		return out, nil
	}

	r.say("taking the snapshot")
	backup, err := r.snapshot(ctx, v)
	if err != nil {
		return out, fmt.Errorf("snapshot before the change (nothing was changed): %w", err)
	}
	out.Backup = backup
	if target != nil {
		if err := writeReplaceRecord(r.BackupDir, v.ClusterID, target.Member, spec); err != nil {
			return out, fmt.Errorf("record the replacement in %s before the remove (nothing was changed): %w", r.BackupDir, err)
		}
		r.say("removing %s", target.Label())
		_, err := retryUnhealthy(ctx, func(ctx context.Context) (*clientv3.MemberRemoveResponse, error) {
			return r.Client.MemberRemove(ctx, uint64(target.ID))
		})
		if err != nil && !errors.Is(err, rpctypes.ErrMemberNotFound) {
			return out, fmt.Errorf("member remove: %w", err)
		}
		out.RemovedID = target.ID
	}
	q, err := r.guardDataDir(ctx, spec)
	if err != nil {
		return out, err
	}
	out.Quarantined = q
	joined, err := r.Joiner.Join(ctx, spec)
	out.Joined = joined
	if err != nil {
		return out, err
	}
	r.say("verifying with doctor")
	out.Findings = r.verify(ctx)
	if worst := finding.Worst(out.Findings); worst == finding.Critical {
		return out, fmt.Errorf("the cluster still has critical findings 30 s after the replacement: %s", findingIDs(out.Findings))
	}
	return out, nil
}

// precheck makes every refusal of replace before anything changes, and returns OLD, or nil
// when an earlier run of this same replace removed it already, and NEW when an earlier run
// started it on its data dir already (see startedEarlier), else nil.
func (r *Replacer) precheck(ctx context.Context, v *cluster.View, old string, spec JoinSpec) (target, started *cluster.MemberView, err error) {
	target = v.Find(old)
	var replacing []etcdmedic.ID
	if target != nil {
		replacing = []etcdmedic.ID{target.ID}
	}
	if err := checkChange(v, spec.PeerURLs, replacing); err != nil {
		return nil, nil, err
	}
	if target == nil {
		evidence, err := checkOldGone(v, old, spec, readReplaceRecord(r.BackupDir, v.ClusterID))
		if err != nil {
			return nil, nil, err
		}
		r.say("member %s is no longer in the membership, removed by an earlier run of this replace (%s): going on from there", old, evidence)
	} else if err := quorumAfterRemoval(v, *target); err != nil {
		return nil, nil, err
	}
	// A refusal after the remove would leave the cluster a member short: judge the new
	// member's peer URLs and data dir now.
	started = startedEarlier(v, spec)
	startedID := etcdmedic.NoID
	if started != nil {
		startedID = started.ID
		r.say("%s holds member %s, which an earlier run of this replace added and started there: its data is kept as it is, and the run goes on from it", spec.DataDir, started.Label())
	}
	if err := checkPeerURLsFree(v, target, spec, startedID); err != nil {
		return nil, nil, err
	}
	if started == nil {
		if err := r.precheckDataDir(ctx, spec); err != nil {
			return nil, nil, err
		}
	}
	return target, started, nil
}

// plan is the steps of the replacement, as the operator reads them before they run.
func (r *Replacer) plan(target *cluster.MemberView, spec JoinSpec, started *cluster.MemberView) []string {
	plan := []string{fmt.Sprintf("snapshot the cluster into %s (sha256 checksummed) and verify it", r.BackupDir)}
	if target != nil {
		plan = append(plan, fmt.Sprintf("etcdctl member remove %s   # %s, %s", target.ID, target.Label(), upOrDown(*target)))
	}
	if started != nil {
		return append(plan,
			fmt.Sprintf("keep %s as it is: member %s, added and started there by an earlier run", spec.DataDir, started.Label()),
			fmt.Sprintf("start %s there unless it runs, wait until it has caught up, etcdctl member promote", spec.Name),
			"verify with etcdmedic doctor: quorum, leader, no critical finding")
	}
	return append(plan,
		fmt.Sprintf("guard %s: quarantine any data in it (moved aside, never deleted)", spec.DataDir),
		fmt.Sprintf("etcdctl member add %s --learner --peer-urls=%s", spec.Name, strings.Join(spec.PeerURLs, ",")),
		fmt.Sprintf("start %s with --initial-cluster-state=existing, wait until it has caught up, etcdctl member promote", spec.Name),
		"verify with etcdmedic doctor: quorum, leader, no critical finding")
}

// verify waits (up to 30 s: a promoted member takes a moment to show as a voter everywhere)
// until doctor finds nothing critical, and returns the last findings.
func (r *Replacer) verify(ctx context.Context) []finding.Finding {
	opts := finding.AwaitOptions{Probe: cluster.ProbeOptions{Discover: true}, Timeout: 30 * time.Second}
	j, _ := finding.Await(ctx, r.Conn, opts, func(j finding.Judged) bool { return !j.Critical() })
	return j.Findings
}

func findingIDs(fs []finding.Finding) string {
	var ids []string
	for _, f := range fs {
		ids = append(ids, f.ID+" ("+f.Subject+")")
	}
	return strings.Join(ids, ", ")
}

func (r *Replacer) say(format string, a ...any) {
	if r.Out != nil {
		fmt.Fprintf(r.Out, "==> "+format+"\n", a...)
	}
}

func (r *Replacer) snapshot(ctx context.Context, v *cluster.View) (*Backup, error) {
	return SaveSnapshot(ctx, r.Conn, v, r.BackupDir, r.Now)
}

// SaveSnapshot saves the leader's (or any voter's) db into dir with its checksum, then reads
// it back: the backup taken before a membership change or an upgrade.
func SaveSnapshot(ctx context.Context, conn cluster.Conn, v *cluster.View, dir string, clock func() time.Time) (*Backup, error) {
	from := ""
	if m := v.MemberByID(v.Leader()); m != nil && m.Up() {
		from = m.Probe.Endpoint
	}
	for _, m := range v.Members {
		if from == "" && m.Up() && !m.IsLearner {
			from = m.Probe.Endpoint
		}
	}
	if from == "" {
		return nil, errors.New("no voter answers to take a snapshot from")
	}
	if err := backup.MkdirAllSynced(dir); err != nil {
		return nil, err
	}
	now := time.Now
	if clock != nil {
		now = clock
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-cluster-%s.snapshot.db", now().UTC().Format("20060102T150405Z"), v.ClusterID))
	cli, err := conn.ClientFor(from)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	saved, err := backup.SaveSnapshot(ctx, cli, path)
	if err != nil {
		return nil, err
	}
	sum, n := saved.SHA256, saved.Size
	if err := backup.WriteFileAtomic(path+".sha256", []byte(sum+"  "+filepath.Base(path)+"\n")); err != nil {
		return nil, err
	}
	if err := backup.VerifySnapshot(path, sum); err != nil {
		return nil, err
	}
	rep, err := datadir.Inspect(path, datadir.Options{})
	if err != nil || rep.Backend == nil {
		return nil, fmt.Errorf("the snapshot %s does not read back: %v", path, err)
	}
	return &Backup{Path: path, Bytes: n, SHA256: sum, Revision: rep.Backend.Revision, From: from}, nil
}

// guardDataDir makes sure the new member starts on an empty data dir, quarantining anything
// found there; the data dir an earlier run started the new member on is left as it is.
func (r *Replacer) guardDataDir(ctx context.Context, spec JoinSpec) (*guard.Quarantined, error) {
	if _, err := os.Stat(spec.DataDir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil // precheckDataDir refused a WAL dir left behind without it
	}
	v := cluster.Observe(ctx, r.Conn)
	if m := startedEarlier(v, spec); m != nil {
		r.say("%s holds member %s, added and started there by an earlier run: kept as it is", spec.DataDir, m.Label())
		return nil, nil
	}
	rep, err := datadir.Inspect(spec.DataDir, datadir.Options{WALDir: spec.WALDir})
	if err != nil {
		return nil, fmt.Errorf("inspect the new member's data dir: %w", err)
	}
	verdict := guard.Classify(rep, v, guard.Expect{Name: spec.Name})
	switch {
	case verdict.Class == guard.Empty:
		return nil, nil
	case verdict.Class == guard.Unknown:
		return nil, fmt.Errorf("cannot judge the new member's data dir: %s", verdict.Reason)
	case verdict.Safe || !verdict.Movable:
		return nil, fmt.Errorf("%w: %s holds %s data (%s): it is not moved; give an empty or stale data dir", ErrRefused, spec.DataDir, verdict.Class, verdict.Reason)
	}
	r.say("%s holds %s data: quarantining it", spec.DataDir, verdict.Class)
	return guard.Quarantine(spec.DataDir, rep, verdict, time.Now())
}

// validateSpec checks the new member's name and URLs the way etcd will, before anything changes.
func validateSpec(spec JoinSpec) error {
	if spec.Name == "" || strings.ContainsAny(spec.Name, "=,") {
		return fmt.Errorf("%w: member name %q: want a non-empty name without '=' or ','", ErrRefused, spec.Name)
	}
	if _, err := types.NewURLs(spec.PeerURLs); err != nil {
		return fmt.Errorf("%w: --peer-urls: %v (want e.g. https://10.0.0.4:2380)", ErrRefused, err)
	}
	if len(spec.ClientURLs) > 0 {
		if _, err := types.NewURLs(spec.ClientURLs); err != nil {
			return fmt.Errorf("%w: --client-urls: %v", ErrRefused, err)
		}
	}
	return nil
}

// precheckDataDir refuses a new data dir that must not be moved or cannot be judged.
func (r *Replacer) precheckDataDir(ctx context.Context, spec JoinSpec) error {
	if spec.DataDir == "" {
		return nil
	}
	if _, err := os.Stat(spec.DataDir); errors.Is(err, fs.ErrNotExist) {
		if spec.WALDir != "" && !emptyOrMissing(spec.WALDir) {
			return fmt.Errorf("%w: the new member's data dir %s does not exist but its WAL dir %s holds files: etcd would replay that old log; give an empty WAL dir, or quarantine it with etcdmedic guard --data-dir %s --wal-dir %s --fix", ErrRefused, spec.DataDir, spec.WALDir, spec.DataDir, spec.WALDir)
		}
		return nil
	}
	rep, err := datadir.Inspect(spec.DataDir, datadir.Options{WALDir: spec.WALDir})
	if err != nil {
		return fmt.Errorf("%w: the new member's data dir: %v", ErrRefused, err)
	}
	v := cluster.Observe(ctx, r.Conn)
	verdict := guard.Classify(rep, v, guard.Expect{Name: spec.Name})
	if verdict.Class != guard.Empty && (verdict.Safe || !verdict.Movable || verdict.Class == guard.Unknown) {
		return fmt.Errorf("%w: %s holds %s data (%s): give an empty or stale data dir", ErrRefused, spec.DataDir, verdict.Class, verdict.Reason)
	}
	return nil
}

func upOrDown(m cluster.MemberView) string {
	if m.Up() {
		return "up"
	}
	return "down"
}

func memberNames(v *cluster.View) string {
	var names []string
	for _, m := range v.Members {
		names = append(names, m.Label())
	}
	return strings.Join(names, ", ")
}

// GuardDataDir quarantines whatever a new member's data dir holds (exported for member add).
func (r *Replacer) GuardDataDir(ctx context.Context, spec JoinSpec) (*guard.Quarantined, error) {
	return r.guardDataDir(ctx, spec)
}

func emptyOrMissing(dir string) bool {
	ents, err := os.ReadDir(dir)
	return err != nil || len(ents) == 0
}
