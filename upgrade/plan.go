package upgrade

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic/plan"
)

// Plan is a rolling upgrade: hops through intermediate versions, one member at a time.
type Plan struct {
	Version   int               `json:"version"`
	CreatedAt time.Time         `json:"createdAt"`
	From      string            `json:"from"`
	Target    string            `json:"target"`
	Members   []Member          `json:"members"`
	Hops      []Hop             `json:"hops"`
	Binaries  map[string]string `json:"binaries"` // version -> etcd binary
	BackupDir string            `json:"backupDir"`
	EtcdFlags []string          `json:"etcdFlags,omitempty"`
	// PassEnv are the ETCD_* variables (NAME=value) the operator passed on purpose with
	// --pass-env: every restarted member gets them, and nothing else of the shell's ETCD_*.
	PassEnv []string `json:"passEnv,omitempty"`
	// Downgrade is the target minor version ("3.5") when the plan goes down.
	Downgrade string      `json:"downgrade,omitempty"`
	Check     *Report     `json:"check"`
	Steps     []plan.Step `json:"steps"`
	Checksum  string      `json:"checksum"`
}

// Member is one member as the upgrade restarts it.
type Member struct {
	Name    string `json:"name"`
	DataDir string `json:"dataDir"`
	// WALDir is its --wal-dir when its WAL lives apart: it is restarted with it.
	WALDir     string   `json:"walDir,omitempty"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
}

// Hop moves every member to one version (or restarts every member on it, to make each
// republish its own membership record).
type Hop struct {
	Version string `json:"version"`
	Why     string `json:"why"`
}

// Hops is the path from current to target: through the newest given v3.5 patch (v3.5.24+) and a
// restart of every member on it when coming from a version whose membership may be stale.
func Hops(current, target *Version, binaries map[string]string) ([]Hop, error) {
	latest := func(major, minor int64) (string, *Version) {
		var best *Version
		var bestKey string
		for k := range binaries {
			v, err := ParseVersion(k)
			if err == nil && v.Major == major && v.Minor == minor && (best == nil || best.LessThan(*v)) {
				best, bestKey = v, k
			}
		}
		return bestKey, best
	}
	var hops []Hop
	if target.Minor < current.Minor {
		if target.Major != current.Major || target.Minor+1 != current.Minor {
			return nil, fmt.Errorf("downgrades go one minor version at a time: from v%d.%d to v%d.%d first", current.Major, current.Minor, current.Major, current.Minor-1)
		}
		for k := range binaries {
			if v, err := ParseVersion(k); err == nil && v.Equal(*target) {
				return []Hop{{Version: k, Why: "downgrade: the storage version was lowered first, so the older binary accepts the data"}}, nil
			}
		}
		return nil, fmt.Errorf("no binary for the target v%s: give it with --etcd-binary v%s=PATH", target, target)
	}
	if current.Major == 3 && current.Minor == 5 && target.Minor >= 6 && current.LessThan(snapshotFlagFixed) {
		k, v := latest(3, 5)
		if v == nil || v.LessThan(snapshotFlagFixed) {
			return nil, fmt.Errorf("the path from v%s to v%s goes through v3.5.24 or later: give its binary with --etcd-binary v3.5.x=PATH", current, target)
		}
		hops = append(hops,
			Hop{Version: k, Why: "v3.5.24+ rewrites member records and fixes learner flags received in snapshots (#19563, #20797)"},
			Hop{Version: k, Why: "restart every member once on it: each republishes its own record, repairing stale ones"})
	}
	for minor := current.Minor + 1; minor < target.Minor; minor++ {
		k, v := latest(3, minor)
		if v == nil {
			return nil, fmt.Errorf("the path to v%s goes through v3.%d: give its binary with --etcd-binary v3.%d.x=PATH", target, minor, minor)
		}
		hops = append(hops, Hop{Version: k, Why: fmt.Sprintf("one minor version at a time: v3.%d first", minor)})
	}
	tk := ""
	for k := range binaries {
		if v, err := ParseVersion(k); err == nil && v.Equal(*target) {
			tk = k
		}
	}
	if tk == "" {
		return nil, fmt.Errorf("no binary for the target v%s: give it with --etcd-binary %s=PATH", target, "v"+target.String())
	}
	return append(hops, Hop{Version: tk, Why: "the target"}), nil
}

// NewPlan lays out the steps: a checksummed snapshot first, then each hop member by member in
// the order given (the caller puts the leader last; if leadership has moved by then, the
// leader is asked to hand it over before its restart), and a check after each hop. It refuses
// (a *BlockedError) when check holds a critical finding the hops do not route around.
func NewPlan(check *Report, current, target *Version, members []Member, binaries map[string]string, backupDir string, etcdFlags []string, now time.Time) (*Plan, error) {
	if backupDir == "" {
		return nil, errors.New("--backup-dir is required: a snapshot is taken before anything changes")
	}
	hops, err := Hops(current, target, binaries)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(backupDir)
	if err != nil {
		return nil, err
	}
	// Paths are made absolute here, once: the plan records them, and apply may run from
	// another directory.
	if members, err = absoluteMembers(members); err != nil {
		return nil, err
	}
	if binaries, err = absoluteBinaries(binaries); err != nil {
		return nil, err
	}
	p := &Plan{Version: 1, CreatedAt: now.UTC(), From: "v" + current.String(), Target: "v" + target.String(), Members: members, Hops: hops,
		Binaries: binaries, BackupDir: abs, EtcdFlags: etcdFlags, Check: check}
	if err := p.blocked(); err != nil {
		return nil, err
	}
	p.Steps = append(p.Steps, plan.NewStep(StepSnapshot, "", "snapshot the cluster into "+abs+" (sha256 checksummed)"))
	if target.Minor < current.Minor {
		p.Downgrade = fmt.Sprintf("%d.%d", target.Major, target.Minor)
		p.Steps = append(p.Steps, plan.NewStep(StepDowngradeEnable, "", fmt.Sprintf("etcdctl downgrade validate %s; etcdctl downgrade enable %s; wait until every member's storage version is %s.0", p.Downgrade, p.Downgrade, p.Downgrade)))
	}
	for h, hop := range hops {
		for _, m := range members {
			p.Steps = append(p.Steps, hopStep(h, m.Name, fmt.Sprintf("hop %d (%s, %s): restart %s on %s, moving leadership away first if it leads; wait until healthy and caught up", h+1, hop.Version, hop.Why, m.Name, hop.Version)))
		}
		p.Steps = append(p.Steps, checkStep(h, fmt.Sprintf("after hop %d: every member up, no critical finding, no membership drift", h+1)))
	}
	return p, nil
}

// Save writes the plan into dir (created if needed) with its checksum.
func (p *Plan) Save(dir string) error { return plan.Save(dir, p) }

// LoadPlan reads and checks a plan folder.
func LoadPlan(dir string) (*Plan, error) {
	var p Plan
	if err := plan.Load(dir, &p); err != nil {
		if plan.IsMissing(err) {
			return nil, fmt.Errorf("no %s in %s: make one with etcdmedic upgrade plan", plan.File, dir)
		}
		return nil, err
	}
	if p.Version != 1 || len(p.Members) == 0 || len(p.Steps) == 0 {
		return nil, fmt.Errorf("%s in %s is not a plan this etcdmedic can apply", plan.File, dir)
	}
	if rel := p.relativePaths(); len(rel) > 0 {
		return nil, fmt.Errorf("%w (made by an older etcdmedic), which apply would look for under its own working directory: %s; make the plan again with etcdmedic upgrade plan into a new --plan-dir", ErrRelativePath, strings.Join(rel, ", "))
	}
	for i := range p.Steps {
		p.Steps[i] = typed(p.Steps[i])
	}
	return &p, nil
}

func (p *Plan) member(name string) Member {
	for _, m := range p.Members {
		if m.Name == name {
			return m
		}
	}
	return Member{}
}

func stepParts(id string) (hop int, name string, ok bool) {
	rest, found := strings.CutPrefix(id, "hop")
	if !found {
		return 0, "", false
	}
	n, name, found := strings.Cut(rest, ":")
	if !found {
		return 0, "", false
	}
	_, err := fmt.Sscanf(n, "%d", &hop)
	return hop, name, err == nil
}
