// Package clustertest builds cluster views by hand, for the tables that test decisions over a
// live cluster (guard, member, recovery) without starting one, as net/http/httptest does for
// handlers.
package clustertest

import (
	"time"

	"github.com/etcdmedic/etcdmedic"
	"github.com/etcdmedic/etcdmedic/cluster"
)

// Voter is a member with hex ID id ("a1") named name, at 10.0.0.1<id[1:]> ("10.0.0.11").
func Voter(id, name string) etcdmedic.Member {
	host := "10.0.0.1" + id[1:]
	return etcdmedic.Member{ID: etcdmedic.MustParseID(id), Name: name, PeerURLs: etcdmedic.URLs{"http://" + host + ":2380"}, ClientURLs: etcdmedic.URLs{"http://" + host + ":2379"}}
}

// Answering is the view of cluster clusterID whose membership is members, as probes find it
// when the members in up answer (with the member list, following the first of them as leader
// when they are a quorum of the voters) and the others refuse the connection.
func Answering(clusterID etcdmedic.ClusterID, members []etcdmedic.Member, up ...etcdmedic.Member) *cluster.View {
	isUp := map[etcdmedic.ID]bool{}
	for _, m := range up {
		isUp[m.ID] = true
	}
	voters, votersUp := 0, 0
	for _, m := range members {
		if !m.IsLearner {
			voters++
			if isUp[m.ID] {
				votersUp++
			}
		}
	}
	leader := etcdmedic.NoID
	if votersUp > voters/2 {
		leader = up[0].ID
	}
	var probes []*cluster.Probe
	for _, m := range members {
		endpoint := "http://" + m.ID.String() + ":2379"
		if len(m.ClientURLs) > 0 {
			endpoint = m.ClientURLs[0]
		}
		if !isUp[m.ID] {
			probes = append(probes, &cluster.Probe{Endpoint: endpoint, Refused: true, Error: "connection refused"})
			continue
		}
		probes = append(probes, &cluster.Probe{Endpoint: endpoint, Reached: true, Healthy: leader != etcdmedic.NoID, Members: members,
			Status: &cluster.Status{ClusterID: clusterID, MemberID: m.ID, Leader: leader, RaftTerm: 3, RaftIndex: 900, AppliedIndex: 900, Version: "3.6.16", IsLearner: m.IsLearner}})
	}
	return cluster.BuildView(probes, time.Unix(0, 0))
}

// CutOff is v with member who partitioned from its peers past its election timeout: it still
// answers clients, but names no leader (raft's pre-candidate forgets it), and is asked no read.
func CutOff(v *cluster.View, who etcdmedic.Member) *cluster.View {
	for _, p := range v.Probes {
		if p.Reached && p.Status.MemberID == who.ID {
			// Past its election timeout, raft's pre-candidate has forgotten its leader.
			p.Status.Leader = etcdmedic.NoID
			p.Healthy, p.HealthErr = false, "not asked (it names no leader)"
		}
	}
	return cluster.BuildView(v.Probes, v.TakenAt)
}
