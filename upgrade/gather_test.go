package upgrade

import (
	"errors"
	"strings"
	"testing"

	"github.com/etcdmedic/etcdmedic"
	"github.com/etcdmedic/etcdmedic/cluster"
)

func memberView(id etcdmedic.ID, name string) cluster.MemberView {
	return cluster.MemberView{Member: record(id, name, false)}
}

// The leader restarts last: one election per hop at most. Each member restarts on its own
// data dir, and a member without one stops the plan.
func TestRestartOrderPutsTheLeaderLast(t *testing.T) {
	v := &cluster.View{Members: []cluster.MemberView{memberView(idM1, "m1"), memberView(idM2, "m2"), memberView(idM3, "m3")},
		Leaders: map[etcdmedic.ID][]string{idM2: {"m1", "m2", "m3"}}}
	dirs := []DataDir{{Name: "m3", DataDir: "/d/m3"}, {Name: "m2", DataDir: "/d/m2", WALDir: "/w/m2"}, {Name: "m1", DataDir: "/d/m1"}}
	got, err := restartOrder(v, dirs)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, m := range got {
		order = append(order, m.Name+"@"+m.DataDir)
	}
	if want := "m1@/d/m1 m3@/d/m3 m2@/d/m2"; strings.Join(order, " ") != want || got[2].WALDir != "/w/m2" || len(got[0].PeerURLs) == 0 {
		t.Fatalf("restart order %v, want %s", order, want)
	}
	var noDir *NoDataDirError
	if _, err := restartOrder(v, dirs[:2]); !errors.As(err, &noDir) || noDir.Member != "m1" {
		t.Fatalf("without m1's data dir: %v", err)
	}
}

// A stopped member's data dir tells its membership; the version it answered with stays.
func TestDataDirFactsReplaceTheLiveOnes(t *testing.T) {
	facts := &Facts{Members: []MemberFacts{live("m1", "3.5.19"), live("m2", "3.5.19")}}
	facts.merge(stopped("m2", v2Promoted, v3Stale, 0))
	facts.merge(stopped("m4", v2Promoted, v3Stale, 0))
	m2 := facts.Members[1]
	if len(facts.Members) != 3 || m2.Source != "data dir" || m2.Version != "3.5.19" || !m2.Checked || len(m2.Drifts) == 0 {
		t.Fatalf("%+v", facts.Members)
	}
}
