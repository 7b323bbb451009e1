package finding

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/cluster"
)

func judged(ps []*cluster.Probe) Judged {
	v := cluster.BuildView(ps, time.Unix(0, 0))
	return Judged{View: v, Findings: ForCluster(v, DefaultClusterRules())}
}

func down(p *cluster.Probe) {
	p.Reached, p.Status, p.Error, p.Refused, p.Healthy = false, nil, "connection refused", true, false
}

// noLeader is a member that answers but knows no leader: its linearizable read fails.
func noLeader(p *cluster.Probe) {
	p.Status.Leader, p.Healthy, p.HealthErr = 0, false, "no leader"
}

// What doctor --watch prints between two rounds, each row a moment of incident 2.
func TestChangesBetweenTwoLooks(t *testing.T) {
	healthy := func() []*cluster.Probe {
		return withMembers([]*cluster.Probe{probe("a", "a", 100), probe("b", "a", 100), probe("c", "a", 100)}, "a", "b", "c")
	}
	oneDown := func() []*cluster.Probe {
		return withMembers([]*cluster.Probe{probe("a", "a", 100), probe("b", "a", 100), probe("c", "a", 100, down)}, "a", "b", "c")
	}
	twoDown := func() []*cluster.Probe {
		return withMembers([]*cluster.Probe{probe("a", "0", 100, noLeader), probe("b", "a", 100, down), probe("c", "a", 100, down)}, "a", "b", "c")
	}
	for _, tc := range []struct {
		name      string
		prev, cur []*cluster.Probe
		want      []string
	}{
		{"nothing changed", healthy(), healthy(), nil},
		{"one member drops out", healthy(), oneDown(), []string{
			"+ [WARNING] member-unreachable", "member nc: up -> down"}},
		{"the second one goes: quorum lost", oneDown(), twoDown(), []string{
			"+ [CRITICAL] quorum-lost", "member na: up, leader -> up", "member nb: up -> down"}},
		{"repaired", twoDown(), healthy(), []string{
			"- cleared quorum-lost", "member na: up -> up, leader", "member nb: down -> up", "member nc: down -> up"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range Changes(judged(tc.prev), judged(tc.cur)) {
				got = append(got, c.String())
			}
			for _, w := range tc.want {
				if !containsPrefix(got, w) {
					t.Errorf("changes %q: want a line starting %q", got, w)
				}
			}
			if tc.want == nil && len(got) > 0 {
				t.Errorf("changes %q, want none", got)
			}
		})
	}
}

// Review item 14: members are tracked by ID. Three members all named "default" (etcd's
// default name) must not hide each other, and a replacement that keeps the old name (a new ID)
// is the old member leaving and a new one joining.
func TestChangesTrackMembersByID(t *testing.T) {
	named := func(ps []*cluster.Probe, name string, renamed ...string) []*cluster.Probe {
		for _, p := range ps {
			for i := range p.Members {
				if len(renamed) == 0 || slices.Contains(renamed, p.Members[i].ID.String()) {
					p.Members[i].Name = name
				}
			}
		}
		return ps
	}
	healthy := named(withMembers([]*cluster.Probe{probe("a", "a", 100), probe("b", "a", 100), probe("c", "a", 100)}, "a", "b", "c"), "default")
	oneDown := named(withMembers([]*cluster.Probe{probe("a", "a", 100), probe("b", "a", 100, down), probe("c", "a", 100)}, "a", "b", "c"), "default")
	before := withMembers([]*cluster.Probe{probe("a", "a", 100), probe("b", "a", 100), probe("c", "a", 100)}, "a", "b", "c")
	replaced := named(withMembers([]*cluster.Probe{probe("a", "a", 100), probe("b", "a", 100), probe("d", "a", 100)}, "a", "b", "d"), "nc", "d")
	for _, tc := range []struct {
		name      string
		prev, cur []*cluster.Probe
		want      []string
	}{
		{"three members named default, one goes down", healthy, oneDown, []string{"member default: up -> down"}},
		{"m3 replaced by a member of the same name", before, replaced, []string{
			"member nc joined the membership (up)", "member nc left the membership"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range Changes(judged(tc.prev), judged(tc.cur)) {
				if c.Kind != FindingRaised && c.Kind != FindingCleared {
					got = append(got, c.String())
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("member changes %q, want %q", got, tc.want)
			}
		})
	}
}

func containsPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
