package upgrade

import (
	"fmt"

	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/finding"
)

// MemberFacts is what is known of one member: its running version (live), and its membership
// stores (from its data dir, or from a db fetched with snapshot save).
type MemberFacts struct {
	Name           string          `json:"name"`
	Version        string          `json:"version,omitempty"`
	StorageVersion string          `json:"storageVersion,omitempty"`
	Source         string          `json:"source"` // "data dir", "fetched db", "live status"
	Drifts         []datadir.Drift `json:"drifts"`
	ZombieMembers  []string        `json:"zombieMembers"` // only in the v3 store
	V2CustomKeys   int             `json:"v2CustomKeys"`
	AuthEnabled    bool            `json:"authEnabled"`
	Checked        bool            `json:"membershipChecked"`
	Error          string          `json:"error,omitempty"`
}

// Report is the verdict for one target version.
type Report struct {
	Target   string            `json:"target"`
	Verdict  string            `json:"verdict"` // SAFE or BLOCKED
	Members  []MemberFacts     `json:"members"`
	Findings []finding.Finding `json:"findings"`
	Path     []string          `json:"path"` // the cheapest safe path, step by step
}

// Stable IDs of upgrade findings.
const (
	IDMembershipDrift   = "upgrade-membership-drift"
	IDZombieMembers     = "upgrade-zombie-members"
	IDV2CustomData      = "upgrade-v2-custom-data"
	IDTooOld            = "upgrade-source-before-fix"
	IDRollingReplace    = "upgrade-rolling-replacement-risk"
	IDSkipsMinor        = "upgrade-skips-a-minor-version"
	IDDowngrade         = "upgrade-is-a-downgrade"
	IDBelowMinimum      = "upgrade-below-minimum"
	IDMixedVersions     = "upgrade-mixed-versions"
	IDMembershipUnknown = "upgrade-membership-not-checked"
	IDMemberUpdateBug   = "upgrade-memberupdate-promotes-learners"
	IDAuthRolling34     = "upgrade-auth-rolling-from-3.4"
	IDEarly35           = "upgrade-to-early-3.5"
)

// FactsFromReport turns an inspect report (of a data dir or a fetched db) into member facts.
func FactsFromReport(name, source string, r *datadir.Report) MemberFacts {
	f := MemberFacts{Name: name, Source: source, Drifts: []datadir.Drift{}, ZombieMembers: []string{}}
	if r.Backend != nil {
		f.StorageVersion, f.AuthEnabled = r.Backend.StorageVersion, r.Backend.AuthEnabled
	}
	if r.Membership == nil || r.Membership.V3 == nil {
		f.Error = "the v3 membership could not be read"
		return f
	}
	f.Checked = true
	f.Drifts = r.Membership.Drifts()
	if f.Drifts == nil {
		f.Drifts = []datadir.Drift{}
	}
	f.V2CustomKeys = r.Membership.V2CustomKeys
	for _, d := range f.Drifts {
		if d.Field == "presence" && d.V3 == "present" {
			f.ZombieMembers = append(f.ZombieMembers, d.MemberID.String())
		}
	}
	return f
}

// Check judges an upgrade of a cluster whose members are described by facts to target.
// current is the lowest version the members run. Each rule (rules.go) guards against one
// etcd issue or upgrade guide, and says nothing when its hazard does not apply.
func Check(current, target *Version, facts []MemberFacts) *Report {
	s := situation{current: current, target: target, facts: facts}
	rep := &Report{Target: s.to(), Members: facts, Findings: []finding.Finding{}}
	add := func(fs ...finding.Finding) { rep.Findings = append(rep.Findings, fs...) }
	add(mixedVersions(s)...)
	add(downgrade(s)...)
	add(skipsMinor(s)...)
	add(early35(s)...)
	add(authRolling34(s)...)
	add(learnerFlagNotPersisted(s)...)
	add(staleFlagsBySnapshot(s)...)
	add(zombieMembers(s)...)
	add(v2CustomData(s)...)
	add(belowMinimumFor37(s)...)
	add(memberUpdatePromotes(s)...)
	drift := membershipDrift(s)
	add(drift...)
	add(membershipNotChecked(s)...)
	finding.Sort(rep.Findings)
	rep.Verdict = "SAFE"
	if finding.Worst(rep.Findings) == finding.Critical {
		rep.Verdict = "BLOCKED"
	}
	rep.Path = cheapestPath(current, target, len(drift) > 0, rep.Verdict == "SAFE")
	return rep
}

// cheapestPath spells out the steps to reach target safely from current.
func cheapestPath(current, target *Version, drift, safe bool) []string {
	if safe {
		return []string{fmt.Sprintf("upgrade one member at a time to v%s, followers first, the leader last (move leadership away before its restart); check health after each", target)}
	}
	var steps []string
	if current.Minor == 5 && target.Minor >= 6 {
		switch {
		case current.LessThan(snapshotFlagFixed):
			steps = append(steps, "upgrade every member to the latest v3.5 (v3.5.24 or later), one at a time")
			steps = append(steps, "restart every member once more on it, one at a time (each republishes its own record)")
		case drift:
			steps = append(steps, fmt.Sprintf("restart every member once on v%s, one at a time (each republishes its own record)", current))
		}
		steps = append(steps, "run etcdmedic upgrade check again: it must say SAFE")
		steps = append(steps, "upgrade to v3.6 one member at a time")
		if target.Minor > 6 {
			steps = append(steps, "upgrade to the latest v3.6 (v3.6.11+), check again, then to v3.7")
		}
		return steps
	}
	if target.Minor > current.Minor+1 {
		steps = append(steps, fmt.Sprintf("upgrade to the latest v%d.%d first", current.Major, current.Minor+1))
	}
	steps = append(steps, "fix what the findings above say, run etcdmedic upgrade check again, then upgrade one member at a time")
	return steps
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
