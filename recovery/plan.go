package recovery

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/etcdmedic/etcdmedic/plan"
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
	Steps       []plan.Step  `json:"steps"`
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
}

// NewPlan turns an assessment into the steps of a recovery.
func NewPlan(a *Assessment, backupDir string, etcdCommand, etcdFlags []string, manifests map[string]string, now time.Time) (*Plan, error) {
	if backupDir == "" {
		return nil, errors.New("--backup-dir is required: every data dir is copied there before anything changes")
	}
	abs, err := filepath.Abs(backupDir)
	if err != nil {
		return nil, err
	}
	s := a.SurvivorCandidate()
	p := &Plan{Version: 1, CreatedAt: now.UTC(), ClusterID: a.ClusterID, Survivor: s.Name, BackupDir: abs,
		EtcdCommand: etcdCommand, EtcdFlags: etcdFlags, Committed: s.Committed(), Revision: s.Revision, Assessment: a}
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
		manifest := manifests[c.Name]
		if manifest != "" {
			if manifest, err = filepath.Abs(manifest); err != nil {
				return nil, err
			}
		}
		p.Members = append(p.Members, PlanMember{Name: c.Name, MemberID: c.MemberID, DataDir: dir, PeerURLs: c.PeerURLs, ClientURLs: c.ClientURLs, Manifest: manifest})
	}
	// Members whose data is unreadable or wiped still rejoin, at the URLs the survivor's
	// membership gives them.
	p.Steps = []plan.Step{
		{ID: "stop-all", Title: "stop every member (their data stays where it is)"},
		{ID: "backup", Title: fmt.Sprintf("back up every data dir into %s with a checksum manifest, and verify it", abs)},
		{ID: "force-new-cluster", Title: fmt.Sprintf("start %s alone with --force-new-cluster (it keeps every entry up to index %d) and wait until it serves writes", s.Name, s.Committed())},
		{ID: "remove-leftovers", Title: fmt.Sprintf("make sure %s is alone: remove any member or learner --force-new-cluster left behind (etcd #20055, #20896)", s.Name)},
		{ID: "restart-clean", Title: fmt.Sprintf("restart %s WITHOUT --force-new-cluster (left on, the next restart would remove the members that rejoin)", s.Name)},
	}
	for _, m := range p.Members {
		if m.Name != s.Name {
			p.Steps = append(p.Steps, plan.Step{ID: "rejoin:" + m.Name, Title: fmt.Sprintf("quarantine %s's old data (never deleted), add it back as a learner, start it, wait until caught up, promote", m.Name)})
		}
	}
	p.Steps = append(p.Steps, plan.Step{ID: "verify", Title: fmt.Sprintf("verify: every member up, a leader, no critical finding, equal hashes, revision at least %d", s.Revision)})
	return p, nil
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
