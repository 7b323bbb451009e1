package datadir

import (
	"slices"
	"sort"

	"github.com/etcdmedic/etcdmedic"
)

// Membership is the member's view of the cluster, from both of etcd's stores.
type Membership struct {
	// V2 is the v2 store (newest .snap plus committed WAL entries after it): what etcd v3.5
	// serves in `member list`. Null when it could not be rebuilt.
	V2 []etcdmedic.Member `json:"v2"`
	// V2Removed lists member IDs the v2 store marks removed.
	V2Removed []etcdmedic.ID `json:"v2Removed"`
	// V3 is the bbolt `members` bucket: authoritative from etcd v3.6 on. Null when the db
	// could not be read.
	V3 []etcdmedic.Member `json:"v3"`
	// V3Removed is the bbolt `members_removed` bucket.
	V3Removed []etcdmedic.ID `json:"v3Removed"`
	// RaftConfState is the voters and learners raft itself has (backend meta/confState).
	RaftConfState *ConfState `json:"raftConfState,omitempty"`
	// V2CustomKeys counts keys written through the v2 API: etcd v3.6 refuses to start with any.
	V2CustomKeys int `json:"v2CustomKeys"`
	// Changes lists the committed membership changes found in the WAL after the snapshot.
	Changes []MembershipChange `json:"changes"`
	// V2ReplayedTo is the index up to which the WAL's changes were replayed into V2:
	// min(last index, max(HardState.Commit, consistent index)); V2ReplayBound says which
	// ("hardState.commit", "consistent index", "last index").
	V2ReplayedTo  uint64 `json:"v2ReplayedTo,omitempty"`
	V2ReplayBound string `json:"v2ReplayBound,omitempty"`
}

// replay applies committed membership changes to a v2 store view, as etcd v3.5 does when it
// replays its WAL (etcdserver applyConfChange and UpdateAttributes). Invalid changes, which
// etcd's validation would have refused, are skipped the same way.
func (m *v2Membership) replay(changes []MembershipChange, after, commit uint64) {
	for _, c := range changes {
		if c.Index <= after || c.Index > commit {
			continue
		}
		id := c.Member.ID
		existing := m.Members[id]
		switch c.Kind {
		case ChangeAdd, ChangeAddLearner:
			if existing == nil && !m.Removed[id] {
				// The v2 store keeps only raftAttributes at add time; the name and client URLs
				// arrive when the member publishes them.
				m.Members[id] = &etcdmedic.Member{ID: id, PeerURLs: c.Member.PeerURLs, IsLearner: c.Kind == ChangeAddLearner}
			}
		case ChangePromote:
			if existing != nil {
				existing.IsLearner = false
			}
		case ChangeRemove:
			if existing != nil {
				delete(m.Members, id)
				m.Removed[id] = true
			}
		case ChangeUpdatePeers:
			if existing != nil {
				existing.PeerURLs = c.Member.PeerURLs
			}
		case ChangeSetAttributes:
			if existing != nil {
				existing.Name, existing.ClientURLs = c.Member.Name, c.Member.ClientURLs
			}
		}
	}
}

func (m *v2Membership) sortedMembers() []etcdmedic.Member {
	out := make([]etcdmedic.Member, 0, len(m.Members))
	for _, mem := range m.Members {
		out = append(out, *mem)
	}
	sortMembers(out)
	return out
}

func sortedIDs(set map[etcdmedic.ID]bool) []etcdmedic.ID {
	out := make([]etcdmedic.ID, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func sortMembers(ms []etcdmedic.Member) {
	sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
}

// Drift is one way the membership stores disagree about one member.
type Drift struct {
	MemberID etcdmedic.ID `json:"memberID"`
	Name     string       `json:"name"`
	// Field is what differs: "presence", "isLearner", "name", "peerURLs", "clientURLs".
	Field string `json:"field"`
	V2    string `json:"v2"`
	V3    string `json:"v3"`
	Raft  string `json:"raft,omitempty"`
}

// Drifts compares the v2 store, the v3 backend and raft's ConfState member by member.
func (ms *Membership) Drifts() []Drift {
	var out []Drift
	if ms.V3 == nil {
		return nil // nothing to compare against: the db is unreadable (reported on its own)
	}
	ids := map[etcdmedic.ID]bool{}
	for _, m := range ms.V2 {
		ids[m.ID] = true
	}
	for _, m := range ms.V3 {
		ids[m.ID] = true
	}
	for _, id := range sortedIDs(ids) {
		v2, v3 := etcdmedic.Find(ms.V2, id), etcdmedic.Find(ms.V3, id)
		name := ""
		if v2 != nil && v2.Name != "" {
			name = v2.Name
		} else if v3 != nil {
			name = v3.Name
		}
		raft := ms.raftRole(id)
		switch {
		case ms.V2 != nil && v2 == nil:
			out = append(out, Drift{MemberID: id, Name: name, Field: "presence", V2: "absent", V3: "present", Raft: raft})
			continue
		case v3 == nil:
			out = append(out, Drift{MemberID: id, Name: name, Field: "presence", V2: "present", V3: "absent", Raft: raft})
			continue
		}
		if v2 == nil {
			continue // no v2 view to compare with
		}
		if v2.IsLearner != v3.IsLearner {
			out = append(out, Drift{MemberID: id, Name: name, Field: "isLearner", V2: boolString(v2.IsLearner), V3: boolString(v3.IsLearner), Raft: raft})
		}
		if v2.Name != v3.Name {
			out = append(out, Drift{MemberID: id, Name: name, Field: "name", V2: v2.Name, V3: v3.Name})
		}
		if !slices.Equal(v2.PeerURLs, v3.PeerURLs) {
			out = append(out, Drift{MemberID: id, Name: name, Field: "peerURLs", V2: v2.PeerURLs.String(), V3: v3.PeerURLs.String()})
		}
		if !slices.Equal(v2.ClientURLs, v3.ClientURLs) {
			out = append(out, Drift{MemberID: id, Name: name, Field: "clientURLs", V2: v2.ClientURLs.String(), V3: v3.ClientURLs.String()})
		}
	}
	// The v3 learner flag against raft itself: decisive where no v2 view exists (etcd v3.7).
	if ms.V2 == nil && ms.RaftConfState != nil {
		for _, m := range ms.V3 {
			switch r := ms.raftRole(m.ID); {
			case r == "absent":
				out = append(out, Drift{MemberID: m.ID, Name: m.Name, Field: "presence", V3: "present", Raft: r})
			case r != "" && r != roleOf(m.IsLearner):
				out = append(out, Drift{MemberID: m.ID, Name: m.Name, Field: "isLearner", V3: boolString(m.IsLearner), Raft: r})
			}
		}
	}
	return out
}

// raftRole is "voter", "learner" or "" (not in raft's configuration, or unknown).
func (ms *Membership) raftRole(id etcdmedic.ID) string {
	if ms.RaftConfState == nil {
		return ""
	}
	if slices.Contains(ms.RaftConfState.Voters, id) {
		return "voter"
	}
	if slices.Contains(ms.RaftConfState.Learners, id) {
		return "learner"
	}
	return "absent"
}

func roleOf(isLearner bool) string {
	if isLearner {
		return "learner"
	}
	return "voter"
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
