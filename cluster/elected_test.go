package cluster

import "testing"

// What a membership change sees in the view, and whether it waits for an election to settle
// before it decides: only where the voters that answer could make a quorum, and some of them
// know no leader yet.
func TestAnElectionUnderWayIsToldFromQuorumLost(t *testing.T) {
	for _, tc := range []struct {
		name     string
		q        Quorum
		electing bool
	}{
		{"the leader just died: one follower knows no leader yet", Quorum{Voters: 3, VotersUp: 2, InQuorum: 1, CutOff: 1, Needed: 2}, true},
		{"the leader just died: neither follower knows one yet", Quorum{Voters: 3, VotersUp: 2, CutOff: 2, Needed: 2}, true},
		{"all three answer, none in a quorum (partitioned from each other)", Quorum{Voters: 3, VotersUp: 3, CutOff: 3, Needed: 2}, true},
		{"a quorum with a leader, a member down", Quorum{Voters: 3, VotersUp: 2, InQuorum: 2, Needed: 2, Proven: true}, false},
		{"a quorum with a leader, one member cut off", Quorum{Voters: 3, VotersUp: 3, InQuorum: 2, CutOff: 1, Needed: 2, Proven: true}, false},
		{"incident 2: two of three masters down, the last cut off", Quorum{Voters: 3, VotersUp: 1, CutOff: 1, Needed: 2}, false},
		{"one answers, two do not answer in time (not proven down)", Quorum{Voters: 3, VotersUp: 1, InQuorum: 1, Unknown: 2, Needed: 2}, false},
		{"five members, two down, two of the rest electing", Quorum{Voters: 5, VotersUp: 3, InQuorum: 1, CutOff: 2, Needed: 3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.q.electing(); got != tc.electing {
				t.Fatalf("electing = %v, want %v (%+v)", got, tc.electing, tc.q)
			}
		})
	}
}
