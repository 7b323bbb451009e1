// Package upgrade decides whether a cluster can move to a target etcd version without failing
// on its membership data (incident 3), and what the cheapest safe path is. Every rule cites the
// etcd issue or document it encodes.
package upgrade

import (
	"fmt"
	"sort"
	"strings"

	"github.com/coreos/go-semver/semver"

	"github.com/etcdmedic/etcdmedic/finding"
)

// Version is an etcd release.
type Version = semver.Version

// ParseVersion accepts "3.5.19" and "v3.5.19".
func ParseVersion(s string) (*Version, error) {
	if len(s) > 0 && s[0] == 'v' {
		s = s[1:]
	}
	v, err := semver.NewVersion(s)
	if err != nil {
		return nil, fmt.Errorf("version %q: want a release such as v3.6.16", s)
	}
	return v, nil
}

func v(s string) Version { return *semver.New(s) }

// Thresholds from etcd's fixes and upgrade guides.
var (
	// early35Fixed: v3.5.0 to v3.5.2 can leave members with different data after a crash
	// (etcd #13967).
	early35Fixed = v("3.5.3")
	// learnerFlagFixed: from v3.5.20, member records are rewritten on every change, so a
	// restart of every member repairs stale learner flags (etcd #19557, fixed by #19563).
	learnerFlagFixed = v("3.5.20")
	// snapshotFlagFixed: from v3.5.24, a member that receives a raft snapshot also fixes the
	// learner flags in it; before, rolling replacements spread stale flags (#20793, #20797).
	snapshotFlagFixed = v("3.5.24")
	// zombieFixed: from v3.5.26, members present only in the v3 store are removed (#20967, #20995).
	zombieFixed = v("3.5.26")
	// minFor37: the upgrade guide asks for v3.6.11 or later before v3.7 (v3.7 no longer loads v2
	// snapshots, #21107, so membership must be repaired while still on v3.6).
	minFor37 = v("3.6.11")
	// memberUpdateFixed: MemberUpdate could promote a learner (#21694), fixed in 3.5.31 and 3.6.12.
	memberUpdateFixed35, memberUpdateFixed36 = v("3.5.31"), v("3.6.12")
)

// situation is what the rules judge: a move from current (the lowest version the members run)
// to target, and what is known of each member.
type situation struct {
	current, target *Version
	facts           []MemberFacts
}

func (s situation) from() string { return "v" + s.current.String() }
func (s situation) to() string   { return "v" + s.target.String() }

// into36 is the move from v3.5 to v3.6 or later, where the v3 store becomes authoritative for
// membership (incident 3).
func (s situation) into36() bool {
	return s.current.Major == 3 && s.current.Minor == 5 && s.target.Minor >= 6
}

// found is a rule's one finding.
func found(id string, sev finding.Severity, summary, why, remedy string, ev ...finding.Evidence) []finding.Finding {
	return []finding.Finding{{ID: id, Severity: sev, Summary: summary, Why: why, Remedy: remedy, Evidence: ev}}
}

// mixedVersions: a rolling step in progress. etcd runs the cluster at its lowest member's
// version (the cluster version), so the check judges from that one.
func mixedVersions(s situation) []finding.Finding {
	versions := map[string][]string{}
	for _, f := range s.facts {
		if f.Version != "" {
			versions[f.Version] = append(versions[f.Version], f.Name)
		}
	}
	if len(versions) < 2 {
		return nil
	}
	var ev []finding.Evidence
	for ver, who := range versions {
		ev = append(ev, finding.Evidence{What: "v" + ver, Value: strings.Join(who, ",")})
	}
	sort.Slice(ev, func(i, j int) bool { return ev[i].What < ev[j].What })
	return found(IDMixedVersions, finding.Warning, "members run different versions: the check uses the lowest, "+s.from(),
		"A rolling upgrade in progress: the cluster runs at its lowest member's level.", "Finish the current rolling step first.", ev...)
}

// downgrade: an older minor version refuses a data dir whose storage version is newer (etcd's
// downgrade guide: etcdctl downgrade validate/enable lowers it first, one minor at a time).
func downgrade(s situation) []finding.Finding {
	t := s.target
	if !t.LessThan(*s.current) || t.Minor >= s.current.Minor {
		return nil
	}
	return found(IDDowngrade, finding.Critical, fmt.Sprintf("%s is a downgrade from %s", s.to(), s.from()),
		"The storage version must be lowered first, or the older version refuses the data dir (etcd downgrade docs).",
		fmt.Sprintf("etcdctl downgrade validate %d.%d; etcdctl downgrade enable %d.%d; wait until every member's STORAGE VERSION shows %d.%d; then swap binaries one member at a time.", t.Major, t.Minor, t.Major, t.Minor, t.Major, t.Minor))
}

// skipsMinor: etcd's upgrade guides support one minor version at a time (v3.5 -> v3.6 -> v3.7).
func skipsMinor(s situation) []finding.Finding {
	if s.target.Major != s.current.Major || s.target.Minor <= s.current.Minor+1 {
		return nil
	}
	return found(IDSkipsMinor, finding.Critical, fmt.Sprintf("%s skips a minor version from %s", s.to(), s.from()),
		"etcd supports upgrades one minor version at a time (upgrade guides).",
		fmt.Sprintf("Upgrade to the latest v%d.%d first, then to %s.", s.current.Major, s.current.Minor+1, s.to()))
}

// from34to35 is the move from v3.4 to v3.5.
func (s situation) from34to35() bool {
	return s.current.Major == 3 && s.current.Minor == 4 && s.target.Minor == 5
}

// early35: v3.5.0 to v3.5.2 can leave members with different data after a crash (etcd #13967,
// fixed in v3.5.3).
func early35(s situation) []finding.Finding {
	if !s.from34to35() || !s.target.LessThan(early35Fixed) {
		return nil
	}
	return found(IDEarly35, finding.Critical, fmt.Sprintf("%s has a data inconsistency bug", s.to()),
		"etcd v3.5.0 to v3.5.2 can leave members with different data after a crash (etcd #13967).",
		"Upgrade to the latest v3.5 instead.")
}

// authRolling34: with auth on, v3.5 writes auth entries to the WAL in a form v3.4 cannot apply
// (etcd #11943): a mixed v3.4/v3.5 cluster breaks, so no rolling upgrade. Said once, for the
// first member seen with auth on.
func authRolling34(s situation) []finding.Finding {
	if !s.from34to35() {
		return nil
	}
	for _, f := range s.facts {
		if f.AuthEnabled {
			return found(IDAuthRolling34, finding.Critical, fmt.Sprintf("auth is enabled (seen on %s): a rolling v3.4 to v3.5 upgrade is not supported", f.Name),
				"With auth on, v3.5 writes auth entries to the WAL in a form v3.4 members cannot apply (etcd #11943): a mixed cluster breaks.",
				"Upgrade all members at once (stop all, swap binaries, start all), or disable auth for the rolling upgrade and enable it again after.")
		}
	}
	return nil
}

// learnerFlagNotPersisted: v3.5.1 to v3.5.19 never rewrote an existing member record, so a
// promoted learner stays a learner in the v3 store (etcd #19557, fixed by #19563 in v3.5.20),
// and v3.6 exits with "too many learner members in cluster".
func learnerFlagNotPersisted(s situation) []finding.Finding {
	if !s.into36() || !s.current.LessThan(learnerFlagFixed) {
		return nil
	}
	return found(IDTooOld, finding.Critical, fmt.Sprintf("%s is before v3.5.20: promoted learners may still be learners in the v3 store", s.from()),
		"v3.5.1 to v3.5.19 never rewrote an existing member record (etcd #19557); v3.6 trusts the v3 store and refuses to start (\"too many learner members in cluster\").",
		"Upgrade every member to v3.5.24 or later first (one at a time), then restart every member once, then check again.")
}

// staleFlagsBySnapshot: on v3.5.20 to v3.5.23 a member added by rolling replacement receives
// the leader's backend, stale learner flags included (etcd #20793, fixed by #20797 in
// v3.5.24). A warning: the drift itself, when seen, is membershipDrift's finding.
func staleFlagsBySnapshot(s situation) []finding.Finding {
	if !s.into36() || s.current.LessThan(learnerFlagFixed) || !s.current.LessThan(snapshotFlagFixed) {
		return nil
	}
	return found(IDRollingReplace, finding.Warning, fmt.Sprintf("%s is before v3.5.24: members added by rolling replacement may carry stale learner flags", s.from()),
		"A learner gets the leader's backend in a raft snapshot; before v3.5.24 the stale flags came with it (etcd #20793, fixed by #20797).",
		"Restart every member once on this version (each republishes its own record), or upgrade to v3.5.24+ first; then check again.")
}

// zombieMembers: before v3.5.26 the v3 store can hold members that are no longer in the
// cluster (etcd #20967, removed by #20995); v3.6 would load them. Only when zombies are seen:
// the version alone is a note in the path.
func zombieMembers(s situation) []finding.Finding {
	if !s.into36() || !s.current.LessThan(zombieFixed) {
		return nil
	}
	var out []finding.Finding
	for _, f := range s.facts {
		if len(f.ZombieMembers) == 0 {
			continue
		}
		zombies := strings.Join(f.ZombieMembers, ",")
		out = append(out, found(IDZombieMembers, finding.Critical, fmt.Sprintf("%s's v3 store holds members that are not in the cluster: %s", f.Name, zombies),
			"Zombie members exist only in the v3 store (etcd #20967); v3.6 would load them as members.",
			"Upgrade to v3.5.26 or later first (it removes them, #20995), or remove them on v3.5; then check again.",
			finding.Evidence{What: f.Name + " v3-only members", Value: zombies})...)
	}
	return out
}

// v2CustomData: v3.6 refuses to start while the v2 store holds keys written through the v2 API
// (etcd #18993, part of the v2 deprecation #12913; `etcdutl check v2store` finds them).
func v2CustomData(s situation) []finding.Finding {
	if !s.into36() {
		return nil
	}
	var out []finding.Finding
	for _, f := range s.facts {
		if f.V2CustomKeys > 0 {
			out = append(out, found(IDV2CustomData, finding.Critical, fmt.Sprintf("%s's v2 store holds %d custom keys", f.Name, f.V2CustomKeys),
				"etcd v3.6 refuses to start while the v2 store holds data written through the v2 API.",
				"Migrate or delete the v2 keys on v3.5; verify with etcdutl check v2store.")...)
		}
	}
	return out
}

// belowMinimumFor37: the v3.7 upgrade guide asks for v3.6.11+; v3.7 no longer loads v2
// snapshots (etcd #21107), so membership must be repaired while still on v3.6.
func belowMinimumFor37(s situation) []finding.Finding {
	if s.target.Minor < 7 || s.current.Minor != 6 || !s.current.LessThan(minFor37) {
		return nil
	}
	return found(IDBelowMinimum, finding.Critical, fmt.Sprintf("%s is below v3.6.11, the minimum for v3.7", s.from()),
		"The upgrade guide for v3.7 asks for v3.6.11+; v3.7 no longer loads v2 snapshots (#21107), so membership must be repaired on v3.6.",
		"Upgrade to the latest v3.6 first, check again, then v3.7.")
}

// memberUpdatePromotes: a MemberUpdate could promote a learner (etcd #21694, fixed in v3.5.31
// and v3.6.12). A note: it harms only an operator who updates a learner's peer URLs.
func memberUpdatePromotes(s situation) []finding.Finding {
	c := s.current
	if !(c.Minor == 5 && c.LessThan(memberUpdateFixed35)) && !(c.Minor == 6 && c.LessThan(memberUpdateFixed36)) {
		return nil
	}
	return found(IDMemberUpdateBug, finding.Info, fmt.Sprintf("%s: a MemberUpdate can promote a learner (fixed in v3.5.31 and v3.6.12)", s.from()),
		"etcd #21694.", "Avoid member update on learners until on a fixed version.")
}

// membershipDrift: a member whose v3 records disagree with raft or the v2 store on who is a
// learner or who is a member. v3.6 makes the v3 store authoritative (incident 3, etcd #19557;
// v3.6.0 resyncs learner flags from the newest .snap only, #19636). Any version: names and
// URLs that differ are left to inspect.
func membershipDrift(s situation) []finding.Finding {
	var out []finding.Finding
	for _, f := range s.facts {
		if !f.Checked {
			continue
		}
		ev := decisiveDrifts(f)
		if len(ev) == 0 {
			continue
		}
		out = append(out, found(IDMembershipDrift, finding.Critical, fmt.Sprintf("%s: the v3 membership disagrees with raft/v2 (%d record(s))", f.Name, len(ev)),
			"v3.6 makes the v3 store authoritative: a wrong learner flag or a missing record makes it refuse to start or act on the wrong membership (incident 3).",
			"On v3.5.20+ restart every member once (each republishes its record), or upgrade to v3.5.24+ and restart; then check again.", ev...)...)
	}
	return out
}

// decisiveDrifts are the drifts of f that v3.6 acts on: a learner flag, or a record present in
// one store only.
func decisiveDrifts(f MemberFacts) []finding.Evidence {
	var ev []finding.Evidence
	for _, d := range f.Drifts {
		if d.Field == "isLearner" || d.Field == "presence" {
			ev = append(ev, finding.Evidence{What: fmt.Sprintf("%s: member %s %s", f.Name, d.MemberID, d.Field), Value: fmt.Sprintf("v2=%s v3=%s raft=%s", dash(d.V2), dash(d.V3), dash(d.Raft))})
		}
	}
	return ev
}

// membershipNotChecked: into v3.6, a member whose v3 records were not read (no data dir, no
// fetched db, or not reachable) may carry incident 3's drift. Online, v3.5 serves member list
// from the v2 store, where it does not show.
func membershipNotChecked(s situation) []finding.Finding {
	if !s.into36() {
		return nil
	}
	var unchecked []string
	for _, f := range s.facts {
		if !f.Checked {
			unchecked = append(unchecked, f.Name)
		}
	}
	if len(unchecked) == 0 {
		return nil
	}
	return found(IDMembershipUnknown, finding.Critical, "membership not checked on "+strings.Join(unchecked, ","),
		"Online, v3.5 serves member list from the v2 store, so the v3 records cannot be seen without their db.",
		"Bring back any member that is down; then give each member's data dir (--data-dir NAME=PATH, members stopped) or add --fetch-backends to copy each member's db with snapshot save.")
}
