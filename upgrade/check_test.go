package upgrade

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/etcdmedic/etcdmedic"
	"github.com/etcdmedic/etcdmedic/datadir"
)

// Member IDs as etcd makes them: m1 started the cluster, m2 and m3 were added as learners and
// promoted, m4 replaced m3, and zombie was removed but stayed in a v3 store.
const (
	idM1, idM2, idM3, idM4 etcdmedic.ID = 0x8e9e05c52164694d, 0x91bc3c398fb3c146, 0xfd422379fda50e48, 0x4f6e2c1a9b3d7e20
	idZombie               etcdmedic.ID = 0x2b1d9e8f7c6a5b40
)

// record is a member record as a store keeps it; "" name: added at runtime, and the store
// never got the name (v3.5.1 to v3.5.19 never rewrote a record, etcd #19557).
func record(id etcdmedic.ID, name string, learner bool) etcdmedic.Member {
	m := etcdmedic.Member{ID: id, Name: name, PeerURLs: etcdmedic.URLs{fmt.Sprintf("http://10.0.0.%d:2380", id%250)}, IsLearner: learner}
	if name != "" {
		m.ClientURLs = etcdmedic.URLs{fmt.Sprintf("http://10.0.0.%d:2379", id%250)}
	}
	return m
}

var (
	// v2Promoted is incident 3's v2 store (what v3.5 serves): three voters.
	v2Promoted = []etcdmedic.Member{record(idM1, "m1", false), record(idM2, "m2", false), record(idM3, "m3", false)}
	// v3Stale is incident 3's v3 store on v3.5.19: m2 and m3 still learners, without names.
	v3Stale = []etcdmedic.Member{record(idM1, "m1", false), record(idM2, "", true), record(idM3, "", true)}
	// v3Rewritten is the v3 store once every member republished its record (v3.5.20+).
	v3Rewritten = []etcdmedic.Member{record(idM1, "m1", false), record(idM2, "m2", false), record(idM3, "m3", false)}
	// v3Unnamed has the learner flags fixed by a snapshot (v3.5.24, #20797), names still empty.
	v3Unnamed = []etcdmedic.Member{record(idM1, "m1", false), record(idM2, "", false), record(idM3, "", false)}
	// v3Zombie holds a member removed from the cluster, in the v3 store only (#20967).
	v3Zombie = append(slices.Clone(v3Rewritten), record(idZombie, "m0", false))
	voters   = []etcdmedic.ID{idM1, idM2, idM3}
)

// fetched is a member's facts from its db copied with snapshot save: its v3 store against
// raft's ConfState (a bare db holds no v2 store).
func fetched(name, version string, v3 []etcdmedic.Member, voters []etcdmedic.ID) MemberFacts {
	f := FactsFromReport(name, "fetched db", &datadir.Report{Backend: &datadir.Backend{},
		Membership: &datadir.Membership{V3: v3, RaftConfState: &datadir.ConfState{Voters: voters}}})
	f.Version = version
	return f
}

// stopped is a stopped member's facts from its data dir: both stores and raft's ConfState; the
// version comes from --from.
func stopped(name string, v2, v3 []etcdmedic.Member, v2CustomKeys int) MemberFacts {
	return FactsFromReport(name, "data dir", &datadir.Report{Backend: &datadir.Backend{},
		Membership: &datadir.Membership{V2: v2, V3: v3, RaftConfState: &datadir.ConfState{Voters: voters}, V2CustomKeys: v2CustomKeys}})
}

// live is a member asked only over the API: a version, no v3 records (v3.5 serves member list
// from the v2 store).
func live(name, version string) MemberFacts {
	return MemberFacts{Name: name, Version: version, Source: "live status"}
}

func unreachable(name string) MemberFacts {
	return MemberFacts{Name: name, Source: "live status", Error: "not reachable"}
}

func withAuth(f MemberFacts) MemberFacts { f.AuthEnabled = true; return f }

// threeMembers is three members with the same facts but their names.
func threeMembers(one func(name string) MemberFacts) []MemberFacts {
	return []MemberFacts{one("m1"), one("m2"), one("m3")}
}

// TestUpgradeDecision is the upgrade check's decision, one row per situation of the incidents
// and of etcd's known upgrade hazards (reference: etcd-facts.md, "Known upgrade hazards").
func TestUpgradeDecision(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to string
		members  []MemberFacts
		verdict  string
		findings []string // every finding's ID, in any order
		path     string   // what the path must say ("": only that there is one)
	}{
		{
			name: "incident 3: v3.5.19 grown by promoted learners, each db fetched, to v3.6",
			from: "3.5.19", to: "3.6.16",
			members:  threeMembers(func(n string) MemberFacts { return fetched(n, "3.5.19", v3Stale, voters) }),
			verdict:  "BLOCKED",
			findings: []string{IDTooOld, IDMembershipDrift, IDMembershipDrift, IDMembershipDrift, IDMemberUpdateBug},
			path:     "v3.5.24",
		},
		{
			name: "incident 3 online without the dbs: v3.5 shows only the v2 store, drift unknown",
			from: "3.5.19", to: "3.6.16",
			members:  threeMembers(func(n string) MemberFacts { return live(n, "3.5.19") }),
			verdict:  "BLOCKED",
			findings: []string{IDTooOld, IDMembershipUnknown, IDMemberUpdateBug},
			path:     "v3.5.24",
		},
		{
			name: "incident 3 offline: the stopped members' data dirs, v2 and v3 stores disagree",
			from: "3.5.19", to: "3.6.16",
			members:  threeMembers(func(n string) MemberFacts { return stopped(n, v2Promoted, v3Stale, 0) }),
			verdict:  "BLOCKED",
			findings: []string{IDTooOld, IDMembershipDrift, IDMembershipDrift, IDMembershipDrift, IDMemberUpdateBug},
			path:     "restart every member once more",
		},
		{
			name: "v3.5.19 to v3.5.24: the first hop of incident 3's safe path",
			from: "3.5.19", to: "3.5.24",
			members:  threeMembers(func(n string) MemberFacts { return live(n, "3.5.19") }),
			verdict:  "SAFE",
			findings: []string{IDMemberUpdateBug},
		},
		{
			name: "v3.5.21 after rolling replacement: m4 got stale learner flags in a snapshot (#20793)",
			from: "3.5.21", to: "3.6.16",
			members: []MemberFacts{
				fetched("m1", "3.5.21", v3Rewritten, voters),
				fetched("m2", "3.5.21", v3Rewritten, voters),
				fetched("m4", "3.5.21", []etcdmedic.Member{record(idM1, "m1", false), record(idM2, "", true), record(idM4, "m4", false)}, []etcdmedic.ID{idM1, idM2, idM4}),
			},
			verdict:  "BLOCKED",
			findings: []string{IDRollingReplace, IDMembershipDrift, IDMemberUpdateBug},
			path:     "v3.5.24",
		},
		{
			name: "v3.5.21, every member's records checked and clean: a warning only",
			from: "3.5.21", to: "3.6.16",
			members:  threeMembers(func(n string) MemberFacts { return fetched(n, "3.5.21", v3Rewritten, voters) }),
			verdict:  "SAFE",
			findings: []string{IDRollingReplace, IDMemberUpdateBug},
		},
		{
			name: "v3.5.24 grown by promoted learners: records rewritten, safe for v3.6",
			from: "3.5.24", to: "3.6.16",
			members:  threeMembers(func(n string) MemberFacts { return fetched(n, "3.5.24", v3Rewritten, voters) }),
			verdict:  "SAFE",
			findings: []string{IDMemberUpdateBug},
			path:     "the leader last",
		},
		{
			name: "v3.5.24 not yet restarted: a stopped member's v3 store still disagrees with v2",
			from: "3.5.24", to: "3.6.16",
			members: []MemberFacts{
				stopped("m1", v2Promoted, v3Rewritten, 0),
				stopped("m2", v2Promoted, v3Stale, 0),
				stopped("m3", v2Promoted, v3Rewritten, 0),
			},
			verdict:  "BLOCKED",
			findings: []string{IDMembershipDrift, IDMemberUpdateBug},
			path:     "restart every member once on v3.5.24",
		},
		{
			name: "v3.5.24, records without names (added before v3.5.20): names are no hazard",
			from: "3.5.24", to: "3.6.16",
			members:  threeMembers(func(n string) MemberFacts { return stopped(n, v2Promoted, v3Unnamed, 0) }),
			verdict:  "SAFE",
			findings: []string{IDMemberUpdateBug},
		},
		{
			name: "v3.5.24, a removed member still in one v3 store (zombie, #20967)",
			from: "3.5.24", to: "3.6.16",
			members: []MemberFacts{
				fetched("m1", "3.5.24", v3Zombie, voters),
				fetched("m2", "3.5.24", v3Rewritten, voters),
				fetched("m3", "3.5.24", v3Rewritten, voters),
			},
			verdict:  "BLOCKED",
			findings: []string{IDZombieMembers, IDMembershipDrift, IDMemberUpdateBug},
		},
		{
			name: "v3.5.24 with keys written through the v2 API: v3.6 refuses to start",
			from: "3.5.24", to: "3.6.16",
			members:  threeMembers(func(n string) MemberFacts { return stopped(n, v2Promoted, v3Rewritten, 3) }),
			verdict:  "BLOCKED",
			findings: []string{IDV2CustomData, IDV2CustomData, IDV2CustomData, IDMemberUpdateBug},
		},
		{
			name: "v3.5.24, a member unreachable: its v3 records cannot be read",
			from: "3.5.24", to: "3.6.16",
			members: []MemberFacts{
				fetched("m1", "3.5.24", v3Rewritten, voters),
				fetched("m2", "3.5.24", v3Rewritten, voters),
				unreachable("m3"),
			},
			verdict:  "BLOCKED",
			findings: []string{IDMembershipUnknown, IDMemberUpdateBug},
		},
		{
			name: "mixed versions mid rolling step: the lowest, v3.5.21, is judged",
			from: "3.5.21", to: "3.6.16",
			members: []MemberFacts{
				fetched("m1", "3.5.24", v3Rewritten, voters),
				fetched("m2", "3.5.21", v3Rewritten, voters),
				fetched("m3", "3.5.21", v3Rewritten, voters),
			},
			verdict:  "SAFE",
			findings: []string{IDMixedVersions, IDRollingReplace, IDMemberUpdateBug},
		},
		{
			name: "v3.5.24 straight to v3.7: one minor version at a time",
			from: "3.5.24", to: "3.7.3",
			members:  threeMembers(func(n string) MemberFacts { return fetched(n, "3.5.24", v3Rewritten, voters) }),
			verdict:  "BLOCKED",
			findings: []string{IDSkipsMinor, IDMemberUpdateBug},
			path:     "v3.6.11+",
		},
		{
			name: "v3.6.4 to v3.6.16: a patch within v3.6",
			from: "3.6.4", to: "3.6.16",
			members:  threeMembers(func(n string) MemberFacts { return fetched(n, "3.6.4", v3Rewritten, voters) }),
			verdict:  "SAFE",
			findings: []string{IDMemberUpdateBug},
		},
		{
			name: "v3.6.5 to v3.7: below v3.6.11, the v3.7 guide's minimum",
			from: "3.6.5", to: "3.7.3",
			members:  threeMembers(func(n string) MemberFacts { return fetched(n, "3.6.5", v3Rewritten, voters) }),
			verdict:  "BLOCKED",
			findings: []string{IDBelowMinimum, IDMemberUpdateBug},
		},
		{
			name: "already v3.6.16, membership clean: safe for v3.7",
			from: "3.6.16", to: "3.7.3",
			members:  threeMembers(func(n string) MemberFacts { return fetched(n, "3.6.16", v3Rewritten, voters) }),
			verdict:  "SAFE",
			findings: []string{},
			path:     "the leader last",
		},
		{
			name: "v3.6.16 whose own snapshot kept a stale learner flag: v3.7 loads no v2 snapshot (#21107)",
			from: "3.6.16", to: "3.7.3",
			members: []MemberFacts{
				fetched("m1", "3.6.16", v3Stale, voters),
				fetched("m2", "3.6.16", v3Rewritten, voters),
				fetched("m3", "3.6.16", v3Rewritten, voters),
			},
			verdict:  "BLOCKED",
			findings: []string{IDMembershipDrift},
		},
		{
			name: "v3.6.16 back to v3.5.24: the storage version must drop first",
			from: "3.6.16", to: "3.5.24",
			members:  threeMembers(func(n string) MemberFacts { return live(n, "3.6.16") }),
			verdict:  "BLOCKED",
			findings: []string{IDDowngrade},
		},
		{
			name: "v3.4.30 to v3.5.2: early v3.5 can leave members with different data (#13967)",
			from: "3.4.30", to: "3.5.2",
			members:  threeMembers(func(n string) MemberFacts { return live(n, "3.4.30") }),
			verdict:  "BLOCKED",
			findings: []string{IDEarly35},
		},
		{
			name: "v3.4.30 with auth on, rolling to v3.5.24: v3.4 cannot apply v3.5's auth entries (#11943)",
			from: "3.4.30", to: "3.5.24",
			members:  []MemberFacts{withAuth(stopped("m1", v2Promoted, v3Rewritten, 0))},
			verdict:  "BLOCKED",
			findings: []string{IDAuthRolling34},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, err := ParseVersion(tc.from)
			if err != nil {
				t.Fatal(err)
			}
			to, err := ParseVersion(tc.to)
			if err != nil {
				t.Fatal(err)
			}
			rep := Check(from, to, tc.members)
			var got []string
			for _, f := range rep.Findings {
				got = append(got, f.ID)
			}
			want := slices.Clone(tc.findings)
			slices.Sort(got)
			slices.Sort(want)
			if rep.Verdict != tc.verdict || !slices.Equal(got, want) {
				t.Errorf("v%s -> v%s: %s with %v, want %s with %v", tc.from, tc.to, rep.Verdict, got, tc.verdict, want)
			}
			if path := strings.Join(rep.Path, "; "); len(rep.Path) == 0 || !strings.Contains(path, tc.path) {
				t.Errorf("path %q, want one that says %q", path, tc.path)
			}
		})
	}
}
