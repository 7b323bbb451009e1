package recovery

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/local"
	"github.com/etcdmedic/etcdmedic/runtime/runbook"
	"github.com/etcdmedic/etcdmedic/runtime/staticpod"
	"github.com/etcdmedic/etcdmedic/runtime/systemd"
)

// Plan is a recovery, decided once and applied (and re-applied after an interruption) as is.
type Plan struct {
	Version     int                 `json:"version"`
	CreatedAt   time.Time           `json:"createdAt"`
	ClusterID   etcdmedic.ClusterID `json:"clusterID"`
	Survivor    string              `json:"survivor"`
	Members     []PlanMember        `json:"members"`
	BackupDir   string              `json:"backupDir"`
	EtcdCommand []string            `json:"etcdCommand,omitempty"` // empty: the etcd linked into etcdmedic
	EtcdFlags   []string            `json:"etcdFlags,omitempty"`   // extra flags every member starts with
	Committed   uint64              `json:"survivorCommitted"`     // the survivor's whole log, committed before the forced start
	Revision    int64               `json:"survivorRevision"`
	Assessment  *Assessment         `json:"assessment"`
	// PassEnv are the ETCD_* variables (NAME=value) the operator passed on purpose with
	// --pass-env: every member started locally gets them, and nothing else of the shell's ETCD_*.
	PassEnv []string `json:"passEnv,omitempty"`
	// FromSnapshot, when set, rebuilds the survivor from a snapshot file instead of from its
	// own data with --force-new-cluster.
	FromSnapshot *SnapshotSource `json:"fromSnapshot,omitempty"`
	// Connection is how apply reaches the members to prove, before each destructive step,
	// that quorum is still lost (no password is kept).
	Connection Connection `json:"connection"`
	// DeclaredDown are the members the operator declared down for good (--down): they count as
	// stopped when they do not answer, at plan and before every destructive step.
	DeclaredDown []string `json:"declaredDown,omitempty"`
	// LeftOut are the data dirs given whose members are no longer in the survivor's
	// membership: the recovery does not touch them.
	LeftOut []LeftOut   `json:"leftOut,omitempty"`
	Steps   []plan.Step `json:"steps"`
}

// LeftOut is a data dir the recovery leaves alone, and why.
type LeftOut struct {
	Name    string `json:"name"`
	DataDir string `json:"dataDir"`
	Reason  string `json:"reason"`
}

// PlanMember is one member as the recovery will start it.
type PlanMember struct {
	Name     string       `json:"name"`
	MemberID etcdmedic.ID `json:"memberID"`
	// DataDir is the real folder (symlinks resolved), where etcdmedic reads, backs up,
	// quarantines and starts etcd; GivenDataDir is the path as the operator gave it.
	DataDir      string `json:"dataDir"`
	GivenDataDir string `json:"givenDataDir,omitempty"`
	// WALDir is the member's --wal-dir when its WAL lives apart: read, backed up, quarantined
	// and started with it.
	WALDir     string   `json:"walDir,omitempty"`
	Standing   string   `json:"standing"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	// Manifest is the member's kubeadm static pod manifest: kubelet runs it, and the recovery
	// stops and starts it by moving and editing that file. Empty: a local process.
	Manifest string `json:"manifest,omitempty"`
	// Runbook is set for a member on a node etcdmedic cannot act on: each of its steps is
	// printed as commands for the operator, confirmed, and checked over the etcd API.
	Runbook runbook.Style `json:"runbook,omitempty"`
	// KubeadmJoin: the node was (or will be) reset with kubeadm and rejoins with kubeadm join
	// --control-plane, which adds and promotes its etcd member itself.
	KubeadmJoin bool `json:"kubeadmJoin,omitempty"`
	// SystemdUnit runs the member on its node: it is stopped with systemctl stop before the
	// member is touched, and the recovery runs the member as a local process.
	SystemdUnit string `json:"systemdUnit,omitempty"`
	// DiscardUnreadable: the operator accepted that this member's unreadable data is moved
	// aside without being considered (anything only it had is kept in quarantine only).
	DiscardUnreadable bool `json:"discardUnreadable,omitempty"`
}

// PlanOptions are the operator's choices that shape a plan.
type PlanOptions struct {
	BackupDir   string
	EtcdCommand []string // empty: the etcd linked into etcdmedic
	EtcdFlags   []string
	// PassEnv are ETCD_* variables as NAME=value (runtime.Passed), recorded for apply.
	PassEnv []string
	// Manifests are kubeadm static pod manifests etcdmedic edits itself, by member name.
	Manifests map[string]string
	// Runbook members are run by the operator from printed commands, by member name.
	Runbook map[string]runbook.Style
	// KubeadmJoin members rejoin with kubeadm join --control-plane (their node is reset).
	KubeadmJoin map[string]bool
	// Snapshot, when set, is restored on the survivor instead of forcing its own data.
	Snapshot *SnapshotOptions
	// SystemdUnits are members run by systemd units, by member name.
	SystemdUnits map[string]string
	// ReAdd names members out of the survivor's membership (removed) to add back anyway.
	ReAdd map[string]bool
	// DiscardUnreadable names members whose data cannot be read, to move aside anyway: the
	// operator accepts that anything only they had is lost to the cluster (kept in quarantine).
	DiscardUnreadable map[string]bool
	// Conn is how plan reached the members; saved without its password.
	Conn cluster.Conn
	// Down names members declared down for good by the operator.
	Down map[string]bool
}

// NewPlan turns an assessment into the steps of a recovery.
func NewPlan(a *Assessment, o PlanOptions, now time.Time) (*Plan, error) {
	backupDir, etcdCommand, etcdFlags := o.BackupDir, o.EtcdCommand, o.EtcdFlags
	if backupDir == "" {
		return nil, errors.New("--backup-dir is required: every data dir is copied there before anything changes")
	}
	abs, err := filepath.Abs(backupDir)
	if err != nil {
		return nil, err
	}
	if err := checkOptionNames(o, a); err != nil {
		return nil, err
	}
	if err := a.checkInput(abs, manifestNames(o.Manifests)); err != nil {
		return nil, err
	}
	for _, c := range a.Candidates {
		if why := a.otherCluster(c); why != "" {
			return nil, fmt.Errorf("the data dir given for %s (%s): %s: check the path; etcdmedic never moves another cluster's data", c.Name, c.DataDir, why)
		}
	}
	s := a.SurvivorCandidate()
	p := &Plan{Version: 1, CreatedAt: now.UTC(), ClusterID: a.ClusterID, Survivor: s.Name, BackupDir: abs,
		EtcdCommand: etcdCommand, EtcdFlags: etcdFlags, PassEnv: o.PassEnv, Committed: s.Kept(), Revision: s.Revision, Assessment: a}
	if o.Snapshot != nil {
		src, err := newSnapshotSource(*o.Snapshot, s)
		if err != nil {
			return nil, err
		}
		p.FromSnapshot, p.Revision = src, src.Revision+int64(src.BumpRevision)
		if loss := s.Revision - src.Revision; loss > 0 {
			a.Warnings = append(a.Warnings, fmt.Sprintf("restoring %s (revision %d) loses %d revisions that %s's own data has (revision %d): without --from-snapshot, nothing it has is lost", src.Path, src.Revision, loss, s.Name, s.Revision))
		}
	}
	p.Connection = connectionOf(o.Conn)
	for name := range o.Down {
		p.DeclaredDown = append(p.DeclaredDown, name)
	}
	sort.Strings(p.DeclaredDown)
	if err := checkEveryVoterGiven(a, s); err != nil {
		return nil, err
	}
	if err := checkFreshBackupDir(abs, a.SurvivorBackup); err != nil {
		return nil, err
	}
	for _, c := range a.Candidates {
		if c.OutOfMembership() && !o.ReAdd[c.Name] {
			p.LeftOut = append(p.LeftOut, LeftOut{Name: c.Name, DataDir: c.DataDir, Reason: fmt.Sprintf("%s in %s's membership: left alone (add it back with --readd %s)", c.Standing, s.Name, c.Name)})
			continue
		}
		if c.OutOfMembership() {
			a.Warnings = append(a.Warnings, fmt.Sprintf("--readd %s: %s is %s in %s's membership; it is added back, and the cluster grows by one member", c.Name, c.Name, c.Standing, s.Name))
		}
		if c.Unreadable && c.Name != s.Name && !o.DiscardUnreadable[c.Name] {
			return nil, fmt.Errorf("%s's data dir %s cannot be read (%s): etcdmedic does not move aside data it could not assess. Repair or copy it first, or accept that anything only %s has may be lost to the cluster (its data is kept in quarantine) with --discard-unreadable %s", c.Name, c.DataDir, c.Rejected, c.Name, c.Name)
		}
		if c.Unreadable && o.DiscardUnreadable[c.Name] {
			a.Warnings = append(a.Warnings, fmt.Sprintf("--discard-unreadable %s: %s's data (%s) is moved aside without being read; whatever only it had is lost to the cluster, kept in quarantine", c.Name, c.Name, c.Rejected))
		}
		if len(c.PeerURLs) == 0 || len(c.ClientURLs) == 0 {
			fillURLs(&c, &s)
		}
		if len(c.PeerURLs) == 0 || len(c.ClientURLs) == 0 {
			return nil, fmt.Errorf("no peer and client URLs on record for %s: neither its own data dir nor the survivor's membership holds them (its data dir is unreadable, or it was stopped before the cluster applied its first publish of its name and client URLs)", c.Name)
		}
		dir := c.RealDataDir
		if o.Runbook[c.Name] != "" || o.KubeadmJoin[c.Name] {
			dir = c.DataDir // on another node: its path as given there, never resolved through this host's links
		}
		if err := checkMemberOptions(o, c.Name, a); err != nil {
			return nil, err
		}
		manifest := o.Manifests[c.Name]
		if manifest != "" {
			if manifest, err = filepath.Abs(manifest); err != nil {
				return nil, err
			}
			if err := (staticpod.Runtime{Manifest: manifest}).Check(c.DataDir); err != nil {
				return nil, fmt.Errorf("--kubeadm-manifest %s: %w", c.Name, err)
			}
		}
		style := o.Runbook[c.Name]
		if o.KubeadmJoin[c.Name] {
			style = runbook.Kubeadm
		}
		given := ""
		if c.DataDir != dir {
			given = c.DataDir
		}
		p.Members = append(p.Members, PlanMember{Name: c.Name, MemberID: c.MemberID, DataDir: dir, GivenDataDir: given, WALDir: c.WALDir, Standing: c.Standing,
			PeerURLs: c.PeerURLs, ClientURLs: c.ClientURLs, Manifest: manifest, Runbook: style, KubeadmJoin: o.KubeadmJoin[c.Name],
			SystemdUnit: o.SystemdUnits[c.Name], DiscardUnreadable: c.Unreadable && o.DiscardUnreadable[c.Name]})
	}
	if err := checkBackupSpace(abs, p.Members); err != nil {
		return nil, err
	}
	// Members whose data is unreadable or wiped still rejoin, at the URLs the survivor's
	// membership gives them.
	p.Steps = []plan.Step{
		plan.NewStep(StepStopAll, "", "stop every member (their data stays where it is)"),
		plan.NewStep(StepBackup, "", fmt.Sprintf("back up every data dir into %s with a checksum manifest, verified: the survivor's now, the others' in the background while it is rebuilt (each verified before its member is touched)", abs)),
	}
	if src := p.FromSnapshot; src != nil {
		p.Steps = append(p.Steps,
			plan.NewStep(StepRestoreSnapshot, "", fmt.Sprintf("quarantine %s's data, restore %s (revision %d%s) into its data dir as a one-member cluster with %s, start it and wait until it serves writes", s.Name, src.Path, src.Revision, src.bumpNote(), src.Etcdutl)),
			plan.NewStep(StepRemoveLeftovers, "", fmt.Sprintf("make sure %s is alone", s.Name)))
	} else if sv := p.Member(s.Name); sv.Runbook == "" {
		start := "then start it normally (no flag)"
		if shortFirstRun(sv, p.PassEnv) {
			start = "then start it without --force-new-cluster, this first run alone with " + strings.Join(shortRunFlags, " ") + " (it elects itself at once)"
		}
		p.Steps = append(p.Steps,
			plan.NewStep(StepForceNewCluster, "", tailCutNote(s)+fmt.Sprintf("leave %s alone, offline: commit its whole log (a HardState with commit index %d appended to its WAL: %d entries past its commit index %d are kept, that --force-new-cluster alone would drop), append to its WAL, committed, the removals of every other member that --force-new-cluster would make at start; %s, and wait until it serves writes", s.Name, s.Kept(), s.PastCommit(), s.Committed(), start)),
			plan.NewStep(StepRemoveLeftovers, "", fmt.Sprintf("make sure %s is alone: remove any member or learner the removals left behind (etcd #20055, #20896)", s.Name)))
		if shortFirstRun(sv, p.PassEnv) {
			p.Steps = append(p.Steps, plan.NewStep(StepRestartClean, "", fmt.Sprintf("once its first run has served %s, restart %s with its own settings, before any member rejoins (SIGTERM, SIGKILL after %s where its etcd, v3.5.5 or later, acknowledged alone only what its WAL holds)", FirstRunServes, s.Name, FirstRunStopGrace)))
		}
	} else if s.TailCut != "" {
		// The cut is made on the data dir itself, which is on the operator's node.
		return nil, fmt.Errorf("%s, the survivor, runs from a printed runbook, but %s: run recover plan on %s's node, where etcdmedic can cut it", s.Name, s.TailCut, s.Name)
	} else {
		p.Steps = append(p.Steps,
			plan.NewStep(StepForceNewCluster, "", fmt.Sprintf("start %s alone with --force-new-cluster on its node and wait until it serves writes", s.Name)),
			plan.NewStep(StepRemoveLeftovers, "", fmt.Sprintf("make sure %s is alone: remove any member or learner --force-new-cluster left behind (etcd #20055, #20896)", s.Name)),
			plan.NewStep(StepRestartClean, "", fmt.Sprintf("restart %s WITHOUT --force-new-cluster (left on, the next restart would remove the members that rejoin)", s.Name)))
	}
	for _, m := range p.Members {
		switch {
		case m.Name == s.Name:
		case m.KubeadmJoin:
			p.Steps = append(p.Steps, plan.NewStep(StepRejoin, m.Name, fmt.Sprintf("on node %s (printed for the operator): quarantine its old data, kubeadm reset, kubeadm join --control-plane (which adds it as a learner and promotes it); checked over the etcd API", m.Name)))
		default:
			p.Steps = append(p.Steps, plan.NewStep(StepRejoin, m.Name, fmt.Sprintf("quarantine %s's old data (never deleted), add it back as a learner, start it, wait until caught up, promote", m.Name)))
		}
	}
	p.Steps = append(p.Steps, plan.NewStep(StepVerify, "", fmt.Sprintf("verify: every member up, a leader, no critical finding, equal hashes, revision at least %d", p.Revision)))
	return p, nil
}

// checkEveryVoterGiven refuses a plan that leaves out a voter of the survivor's membership: its
// history would never be read, it could not be proven down before each destructive step, and
// --force-new-cluster would drop it from the membership without a word.
func checkEveryVoterGiven(a *Assessment, s Candidate) error {
	for _, m := range s.Membership {
		if m.IsLearner || a.given(m) {
			continue
		}
		return fmt.Errorf("%s is a voter in %s's membership (member %s, peer URLs %v) but no --data-dir was given for it: give its data dir, as NAME=PATH on its node (a path that does not exist counts as wiped); nothing was changed", m.ShortLabel(), s.Name, m.ID, m.PeerURLs)
	}
	return nil
}

// checkFolderOutsideMembers refuses a folder of the recovery's own (flag names it: the backup
// dir, the plan dir) that is, lies inside, or holds a member's data dir or WAL dir (symlinks
// resolved): the recovery moves that member's folders into quarantine, and with them the backups
// taken first (the survivor's only copy from before the change), or the plan and the journal a
// rerun resumes from; backups taken first would also be copied again into the next member's.
func checkFolderOutsideMembers(flag, dir string, cs []Candidate) error {
	b := resolvedPath(dir)
	shown := dir
	if b != absolute(dir) {
		shown += " (" + b + ")"
	}
	for _, c := range cs {
		for _, d := range c.dirs() {
			switch {
			case within(b, d.path):
				return refuseInput("%s %s is, or lies inside, %s: the recovery moves that folder aside with what %s holds; choose a folder outside every member's data dir and WAL dir", flag, shown, d, flag)
			case within(d.path, b):
				return refuseInput("%s %s holds %s: choose a folder outside every member's data dir and WAL dir", flag, shown, d)
			}
		}
	}
	return nil
}

// within reports whether path is dir or lies inside it (both absolute and resolved).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// checkFreshBackupDir refuses a backup folder that already holds backups: an old copy that
// verifies against its own manifest must never pass for this recovery's. ours is the backup
// this plan took itself ("" for none).
func checkFreshBackupDir(dir string, ours ...string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range ents {
		// A .partial copy is never taken for a backup (a new copy replaces it).
		if !strings.HasSuffix(e.Name(), ".partial") && !slices.Contains(ours, filepath.Join(dir, e.Name())) {
			return fmt.Errorf("--backup-dir %s is not empty (%s, ...): choose a new folder for this recovery's backups, so that no older copy passes for them", dir, e.Name())
		}
	}
	return nil
}

// checkMemberOptions refuses options that name no member or contradict each other.
func checkMemberOptions(o PlanOptions, name string, a *Assessment) error {
	if o.Manifests[name] != "" && (o.Runbook[name] != "" || o.KubeadmJoin[name]) {
		return fmt.Errorf("member %s: --kubeadm-manifest (etcdmedic edits the manifest) and --runbook/--kubeadm-join (the operator acts) exclude each other", name)
	}
	if o.SystemdUnits[name] != "" && (o.Manifests[name] != "" || o.Runbook[name] != "" || o.KubeadmJoin[name]) {
		return fmt.Errorf("member %s: --systemd-unit and --kubeadm-manifest/--runbook/--kubeadm-join exclude each other", name)
	}
	if o.KubeadmJoin[name] && name == a.Survivor {
		return fmt.Errorf("member %s is the survivor: it is rebuilt in place, not joined again; drop --kubeadm-join %s", name, name)
	}
	return nil
}

// checkOptionNames refuses options naming a member the assessment does not have.
func checkOptionNames(o PlanOptions, a *Assessment) error {
	known := map[string]bool{}
	for _, c := range a.Candidates {
		known[c.Name] = true
	}
	for _, names := range []map[string]bool{keys(o.Manifests), keys(o.Runbook), o.KubeadmJoin, keys(o.SystemdUnits), o.ReAdd, o.DiscardUnreadable, o.Down} {
		for n := range names {
			if !known[n] {
				return fmt.Errorf("no member called %s among the data dirs given (--data-dir NAME=PATH)", n)
			}
		}
	}
	return nil
}

func keys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

// Save writes the plan into dir (created if needed) with its checksum.
func (p *Plan) Save(dir string) error { return plan.Save(dir, p) }

// LoadPlan reads and checks a plan folder.
func LoadPlan(dir string) (*Plan, error) {
	var p Plan
	if err := plan.Load(dir, &p); err != nil {
		if plan.IsMissing(err) {
			return nil, fmt.Errorf("no %s in %s: make one with etcdmedic recover plan", plan.File, dir)
		}
		return nil, err
	}
	if p.Version != 1 || len(p.Members) == 0 || len(p.Steps) == 0 {
		return nil, fmt.Errorf("%s in %s is not a plan this etcdmedic can apply", plan.File, dir)
	}
	return &p, nil
}

// Member returns the plan's member called name.
func (p *Plan) Member(name string) PlanMember {
	for _, m := range p.Members {
		if m.Name == name {
			return m
		}
	}
	return PlanMember{}
}

// Stopper is how Assess stops a member found running, by the plan's options: its static pod,
// its systemd unit, or the process that holds its data dir.
func Stopper(o PlanOptions, processes local.Runtime) func(Candidate) runtime.Runtime {
	return func(c Candidate) runtime.Runtime {
		switch {
		case o.Manifests[c.Name] != "":
			return staticpod.Runtime{Manifest: o.Manifests[c.Name]}
		case o.SystemdUnits[c.Name] != "":
			return systemd.Runtime{Unit: o.SystemdUnits[c.Name], Then: processes}
		}
		return processes
	}
}

// tailCutNote is the first words of the step that cuts the survivor's invalid WAL tail.
func tailCutNote(s Candidate) string {
	if s.TailCut == "" {
		return ""
	}
	return s.Name + ": " + s.TailCut + "; then "
}
