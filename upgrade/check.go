package upgrade

import (
	"fmt"
	"sort"
	"strings"

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
// current is the lowest version the members run.
func Check(current, target *Version, facts []MemberFacts) *Report {
	rep := &Report{Target: "v" + target.String(), Members: facts, Findings: []finding.Finding{}}
	add := func(id string, sev finding.Severity, summary, why, remedy string, ev ...finding.Evidence) {
		rep.Findings = append(rep.Findings, finding.Finding{ID: id, Severity: sev, Summary: summary, Why: why, Remedy: remedy, Evidence: ev})
	}
	cur := fmt.Sprintf("v%s", current)
	versions := map[string][]string{}
	for _, f := range facts {
		if f.Version != "" {
			versions[f.Version] = append(versions[f.Version], f.Name)
		}
	}
	if len(versions) > 1 {
		var ev []finding.Evidence
		for ver, who := range versions {
			ev = append(ev, finding.Evidence{What: "v" + ver, Value: strings.Join(who, ",")})
		}
		sort.Slice(ev, func(i, j int) bool { return ev[i].What < ev[j].What })
		add(IDMixedVersions, finding.Warning, "members run different versions: the check uses the lowest, "+cur,
			"A rolling upgrade in progress: the cluster runs at its lowest member's level.", "Finish the current rolling step first.", ev...)
	}
	switch {
	case target.LessThan(*current) && target.Minor < current.Minor:
		add(IDDowngrade, finding.Critical, fmt.Sprintf("%s is a downgrade from %s", rep.Target, cur),
			"The storage version must be lowered first, or the older version refuses the data dir (etcd downgrade docs).",
			fmt.Sprintf("etcdctl downgrade validate %d.%d; etcdctl downgrade enable %d.%d; wait until every member's STORAGE VERSION shows %d.%d; then swap binaries one member at a time.", target.Major, target.Minor, target.Major, target.Minor, target.Major, target.Minor))
	case target.Major == current.Major && target.Minor > current.Minor+1:
		add(IDSkipsMinor, finding.Critical, fmt.Sprintf("%s skips a minor version from %s", rep.Target, cur),
			"etcd supports upgrades one minor version at a time (upgrade guides).",
			fmt.Sprintf("Upgrade to the latest v%d.%d first, then to %s.", current.Major, current.Minor+1, rep.Target))
	}
	if current.Major == 3 && current.Minor == 4 && target.Minor == 5 {
		if target.LessThan(v("3.5.3")) {
			add(IDEarly35, finding.Critical, fmt.Sprintf("%s has a data inconsistency bug", rep.Target),
				"etcd v3.5.0 to v3.5.2 can leave members with different data after a crash (etcd #13967).",
				"Upgrade to the latest v3.5 instead.")
		}
		for _, f := range facts {
			if f.AuthEnabled {
				add(IDAuthRolling34, finding.Critical, fmt.Sprintf("auth is enabled (seen on %s): a rolling v3.4 to v3.5 upgrade is not supported", f.Name),
					"With auth on, v3.5 writes auth entries to the WAL in a form v3.4 members cannot apply (etcd #11943): a mixed cluster breaks.",
					"Upgrade all members at once (stop all, swap binaries, start all), or disable auth for the rolling upgrade and enable it again after.")
				break
			}
		}
	}
	to36 := current.Major == 3 && current.Minor == 5 && target.Minor >= 6
	if to36 {
		switch {
		case current.LessThan(learnerFlagFixed):
			add(IDTooOld, finding.Critical, fmt.Sprintf("%s is before v3.5.20: promoted learners may still be learners in the v3 store", cur),
				"v3.5.1 to v3.5.19 never rewrote an existing member record (etcd #19557); v3.6 trusts the v3 store and refuses to start (\"too many learner members in cluster\").",
				"Upgrade every member to v3.5.24 or later first (one at a time), then restart every member once, then check again.")
		case current.LessThan(snapshotFlagFixed):
			add(IDRollingReplace, finding.Warning, fmt.Sprintf("%s is before v3.5.24: members added by rolling replacement may carry stale learner flags", cur),
				"A learner gets the leader's backend in a raft snapshot; before v3.5.24 the stale flags came with it (etcd #20793, fixed by #20797).",
				"Restart every member once on this version (each republishes its own record), or upgrade to v3.5.24+ first; then check again.")
		}
		if current.LessThan(zombieFixed) {
			// Only a finding when zombies are seen; the version alone is a note in the path.
			for _, f := range facts {
				if len(f.ZombieMembers) > 0 {
					add(IDZombieMembers, finding.Critical, fmt.Sprintf("%s's v3 store holds members that are not in the cluster: %s", f.Name, strings.Join(f.ZombieMembers, ",")),
						"Zombie members exist only in the v3 store (etcd #20967); v3.6 would load them as members.",
						"Upgrade to v3.5.26 or later first (it removes them, #20995), or remove them on v3.5; then check again.",
						finding.Evidence{What: f.Name + " v3-only members", Value: strings.Join(f.ZombieMembers, ",")})
				}
			}
		}
		for _, f := range facts {
			if f.V2CustomKeys > 0 {
				add(IDV2CustomData, finding.Critical, fmt.Sprintf("%s's v2 store holds %d custom keys", f.Name, f.V2CustomKeys),
					"etcd v3.6 refuses to start while the v2 store holds data written through the v2 API.",
					"Migrate or delete the v2 keys on v3.5; verify with etcdutl check v2store.")
			}
		}
	}
	if target.Minor >= 7 && current.Minor == 6 && current.LessThan(minFor37) {
		add(IDBelowMinimum, finding.Critical, fmt.Sprintf("%s is below v3.6.11, the minimum for v3.7", cur),
			"The upgrade guide for v3.7 asks for v3.6.11+; v3.7 no longer loads v2 snapshots (#21107), so membership must be repaired on v3.6.",
			"Upgrade to the latest v3.6 first, check again, then v3.7.")
	}
	if (current.Minor == 5 && current.LessThan(memberUpdateFixed35)) || (current.Minor == 6 && current.LessThan(memberUpdateFixed36)) {
		add(IDMemberUpdateBug, finding.Info, fmt.Sprintf("%s: a MemberUpdate can promote a learner (fixed in v3.5.31 and v3.6.12)", cur),
			"etcd #21694.", "Avoid member update on learners until on a fixed version.")
	}
	drifted, unchecked := []string{}, []string{}
	for _, f := range facts {
		if !f.Checked {
			unchecked = append(unchecked, f.Name)
			continue
		}
		var ev []finding.Evidence
		for _, d := range f.Drifts {
			if d.Field == "isLearner" || d.Field == "presence" {
				ev = append(ev, finding.Evidence{What: fmt.Sprintf("%s: member %s %s", f.Name, d.MemberID, d.Field), Value: fmt.Sprintf("v2=%s v3=%s raft=%s", dash(d.V2), dash(d.V3), dash(d.Raft))})
			}
		}
		if len(ev) > 0 {
			drifted = append(drifted, f.Name)
			add(IDMembershipDrift, finding.Critical, fmt.Sprintf("%s: the v3 membership disagrees with raft/v2 (%d record(s))", f.Name, len(ev)),
				"v3.6 makes the v3 store authoritative: a wrong learner flag or a missing record makes it refuse to start or act on the wrong membership (incident 3).",
				"On v3.5.20+ restart every member once (each republishes its record), or upgrade to v3.5.24+ and restart; then check again.", ev...)
		}
	}
	if len(unchecked) > 0 && to36 {
		add(IDMembershipUnknown, finding.Critical, "membership not checked on "+strings.Join(unchecked, ","),
			"Online, v3.5 serves member list from the v2 store, so the v3 records cannot be seen without their db.",
			"Give each member's data dir (--data-dir NAME=PATH, members stopped) or add --fetch-backends to copy each member's db with snapshot save.")
	}
	finding.Sort(rep.Findings)
	rep.Verdict = "SAFE"
	if finding.Worst(rep.Findings) == finding.Critical {
		rep.Verdict = "BLOCKED"
	}
	rep.Path = cheapestPath(current, target, len(drifted) > 0, rep.Verdict == "SAFE")
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
