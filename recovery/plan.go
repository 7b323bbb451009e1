package recovery

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/runtime/runbook"
	"github.com/etcdmedic/etcdmedic/runtime/staticpod"
)

// Plan is a recovery, decided once and applied (and re-applied after an interruption) as is.
type Plan struct {
	Version     int          `json:"version"`
	CreatedAt   time.Time    `json:"createdAt"`
	ClusterID   string       `json:"clusterID"`
	Survivor    string       `json:"survivor"`
	Members     []PlanMember `json:"members"`
	BackupDir   string       `json:"backupDir"`
	EtcdCommand []string     `json:"etcdCommand,omitempty"` // empty: the etcd linked into etcdmedic
	EtcdFlags   []string     `json:"etcdFlags,omitempty"`   // extra flags every member starts with
	Committed   uint64       `json:"survivorCommitted"`
	Revision    int64        `json:"survivorRevision"`
	Assessment  *Assessment  `json:"assessment"`
	// FromSnapshot, when set, rebuilds the survivor from a snapshot file instead of from its
	// own data with --force-new-cluster.
	FromSnapshot *SnapshotSource `json:"fromSnapshot,omitempty"`
	Steps        []plan.Step     `json:"steps"`
}

// PlanMember is one member as the recovery will start it.
type PlanMember struct {
	Name       string   `json:"name"`
	MemberID   string   `json:"memberID"`
	DataDir    string   `json:"dataDir"`
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
}

// PlanOptions are the operator's choices that shape a plan.
type PlanOptions struct {
	BackupDir   string
	EtcdCommand []string // empty: the etcd linked into etcdmedic
	EtcdFlags   []string
	// Manifests are kubeadm static pod manifests etcdmedic edits itself, by member name.
	Manifests map[string]string
	// Runbook members are run by the operator from printed commands, by member name.
	Runbook map[string]runbook.Style
	// KubeadmJoin members rejoin with kubeadm join --control-plane (their node is reset).
	KubeadmJoin map[string]bool
	// Snapshot, when set, is restored on the survivor instead of forcing its own data.
	Snapshot *SnapshotOptions
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
	// A data dir of another cluster is a wrong path or a volume mixed up: the recovery would
	// move it aside as a member's old data. Never act on another cluster's data.
	for _, c := range a.Candidates {
		if c.ClusterID != "" && c.ClusterID != a.ClusterID {
			return nil, fmt.Errorf("the data dir given for %s (%s) holds data of cluster %s, not of %s like the others: check the path; etcdmedic never moves another cluster's data", c.Name, c.DataDir, c.ClusterID, a.ClusterID)
		}
	}
	s := a.SurvivorCandidate()
	p := &Plan{Version: 1, CreatedAt: now.UTC(), ClusterID: a.ClusterID, Survivor: s.Name, BackupDir: abs,
		EtcdCommand: etcdCommand, EtcdFlags: etcdFlags, Committed: s.Committed(), Revision: s.Revision, Assessment: a}
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
	for _, c := range a.Candidates {
		if len(c.PeerURLs) == 0 || len(c.ClientURLs) == 0 {
			// A wiped member: its URLs are in the survivor's membership.
			for _, m := range s.Membership {
				if m.Name == c.Name {
					c.PeerURLs, c.ClientURLs, c.MemberID = m.PeerURLs, m.ClientURLs, m.ID.String()
				}
			}
		}
		if len(c.PeerURLs) == 0 || len(c.ClientURLs) == 0 {
			return nil, fmt.Errorf("no peer and client URLs on record for %s (its data dir is unreadable and the survivor's membership has no member of that name)", c.Name)
		}
		dir, err := filepath.Abs(c.DataDir)
		if err != nil {
			return nil, err
		}
		if err := checkMemberOptions(o, c.Name, a); err != nil {
			return nil, err
		}
		manifest := o.Manifests[c.Name]
		if manifest != "" {
			if manifest, err = filepath.Abs(manifest); err != nil {
				return nil, err
			}
			if err := (staticpod.Runtime{Manifest: manifest}).Check(dir); err != nil {
				return nil, fmt.Errorf("--kubeadm-manifest %s: %w", c.Name, err)
			}
		}
		style := o.Runbook[c.Name]
		if o.KubeadmJoin[c.Name] {
			style = runbook.Kubeadm
		}
		p.Members = append(p.Members, PlanMember{Name: c.Name, MemberID: c.MemberID, DataDir: dir, PeerURLs: c.PeerURLs, ClientURLs: c.ClientURLs,
			Manifest: manifest, Runbook: style, KubeadmJoin: o.KubeadmJoin[c.Name]})
	}
	// Members whose data is unreadable or wiped still rejoin, at the URLs the survivor's
	// membership gives them.
	p.Steps = []plan.Step{
		{ID: "stop-all", Title: "stop every member (their data stays where it is)"},
		{ID: "backup", Title: fmt.Sprintf("back up every data dir into %s with a checksum manifest, verified: the survivor's now, the others' in the background while it is rebuilt (each verified before its member is touched)", abs)},
	}
	if src := p.FromSnapshot; src != nil {
		p.Steps = append(p.Steps,
			plan.Step{ID: "restore-snapshot", Title: fmt.Sprintf("quarantine %s's data, restore %s (revision %d%s) into its data dir as a one-member cluster with %s, start it and wait until it serves writes", s.Name, src.Path, src.Revision, src.bumpNote(), src.Etcdutl)},
			plan.Step{ID: "remove-leftovers", Title: fmt.Sprintf("make sure %s is alone", s.Name)})
	} else {
		p.Steps = append(p.Steps,
			plan.Step{ID: "force-new-cluster", Title: fmt.Sprintf("start %s alone with --force-new-cluster (it keeps every entry up to index %d) and wait until it serves writes", s.Name, s.Committed())},
			plan.Step{ID: "remove-leftovers", Title: fmt.Sprintf("make sure %s is alone: remove any member or learner --force-new-cluster left behind (etcd #20055, #20896)", s.Name)},
			plan.Step{ID: "restart-clean", Title: fmt.Sprintf("restart %s WITHOUT --force-new-cluster (left on, the next restart would remove the members that rejoin)", s.Name)})
	}
	for _, m := range p.Members {
		switch {
		case m.Name == s.Name:
		case m.KubeadmJoin:
			p.Steps = append(p.Steps, plan.Step{ID: "rejoin:" + m.Name, Title: fmt.Sprintf("on node %s (printed for the operator): quarantine its old data, kubeadm reset, kubeadm join --control-plane (which adds it as a learner and promotes it); checked over the etcd API", m.Name)})
		default:
			p.Steps = append(p.Steps, plan.Step{ID: "rejoin:" + m.Name, Title: fmt.Sprintf("quarantine %s's old data (never deleted), add it back as a learner, start it, wait until caught up, promote", m.Name)})
		}
	}
	p.Steps = append(p.Steps, plan.Step{ID: "verify", Title: fmt.Sprintf("verify: every member up, a leader, no critical finding, equal hashes, revision at least %d", p.Revision)})
	return p, nil
}

// checkMemberOptions refuses options that name no member or contradict each other.
func checkMemberOptions(o PlanOptions, name string, a *Assessment) error {
	if o.Manifests[name] != "" && (o.Runbook[name] != "" || o.KubeadmJoin[name]) {
		return fmt.Errorf("member %s: --kubeadm-manifest (etcdmedic edits the manifest) and --runbook/--kubeadm-join (the operator acts) exclude each other", name)
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
	for _, names := range []map[string]bool{keys(o.Manifests), keys(o.Runbook), o.KubeadmJoin} {
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
