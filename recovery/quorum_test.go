package recovery

import (
	"errors"
	"net"
	"testing"

	"github.com/etcdmedic/etcdmedic/cluster"
)

// One row per situation an operator meets in the middle of incident 2: only members proven
// down count as down.
func TestQuorumVerdict(t *testing.T) {
	stopped := MemberState{Voter: true, State: StateStopped}
	running := MemberState{Voter: true, State: StateRunning}
	unknown := MemberState{Voter: true, State: StateUnknown}
	leading := MemberState{Voter: true, State: StateServing, Leader: true}
	alone := MemberState{Voter: true, State: StateServing}
	learner := MemberState{Voter: false, State: StateServing, Leader: true}
	for name, tt := range map[string]struct {
		members []MemberState
		want    error
	}{
		"every member down (killed, wiped)":                      {[]MemberState{stopped, stopped, stopped}, nil},
		"one restarted by its supervisor, serving nothing":       {[]MemberState{running, stopped, stopped}, nil},
		"one member left without quorum, naming no leader":       {[]MemberState{alone, stopped, stopped}, nil},
		"two answering a wrong CA with TLS errors":               {[]MemberState{unknown, unknown, stopped}, ErrCannotTell},
		"two running but not serving (starting, or partitioned)": {[]MemberState{running, running, stopped}, ErrCannotTell},
		"quorum back, serving with a leader":                     {[]MemberState{leading, leading, stopped}, ErrNotNeeded},
		"a learner does not make a quorum":                       {[]MemberState{leading, stopped, stopped, learner}, nil},
		"five members, two unknown, three down":                  {[]MemberState{unknown, unknown, stopped, stopped, stopped}, nil},
		"no voter known":                                         {[]MemberState{{State: StateStopped}}, ErrCannotTell},
		"five members, three timing out":                         {[]MemberState{unknown, unknown, unknown, stopped, stopped}, ErrCannotTell},
	} {
		qc := &QuorumCheck{Members: tt.members}
		if err := qc.verdict(); !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
			t.Errorf("%s: %v, want %v", name, err, tt.want)
		}
	}
}

func TestMemberStateFailsClosed(t *testing.T) {
	dir := t.TempDir() // a data dir nobody holds
	for name, tt := range map[string]struct {
		target quorumTarget
		errs   []string
		want   string
	}{
		"refused, data dir not locked":    {quorumTarget{DataDir: dir, ClientURLs: []string{"u1"}}, []string{"connection refused"}, StateStopped},
		"timeout":                         {quorumTarget{DataDir: dir, ClientURLs: []string{"u1"}}, []string{"no answer within the command timeout"}, StateUnknown},
		"TLS error":                       {quorumTarget{ClientURLs: []string{"u1"}}, []string{"TLS: x509: certificate signed by unknown authority"}, StateUnknown},
		"one URL refused, one timing out": {quorumTarget{ClientURLs: []string{"u1", "u2"}}, []string{"connection refused", "no answer within the command timeout"}, StateUnknown},
		"no URL, data dir not locked":     {quorumTarget{DataDir: dir}, nil, StateStopped},
		"no URL, no data dir here":        {quorumTarget{}, nil, StateUnknown},
		"timing out, declared down":       {quorumTarget{ClientURLs: []string{"u1"}, Down: true}, []string{"no answer within the command timeout"}, StateStopped},
		"client refused, peer answers":    {quorumTarget{ClientURLs: []string{"u1"}, PeerURLs: []string{"http://" + listening(t)}}, []string{"connection refused"}, StateUnknown},
	} {
		got := memberState(tt.target, stubProbes(tt.target.ClientURLs, tt.errs))
		if got.State != tt.want {
			t.Errorf("%s: %s (%s), want %s", name, got.State, got.Evidence, tt.want)
		}
	}
}

// stubProbes are probe results as ProbeAll leaves them: one per URL, with its error.
func stubProbes(urls, errs []string) map[string]*cluster.Probe {
	out := map[string]*cluster.Probe{}
	for i, u := range urls {
		out[u] = &cluster.Probe{Endpoint: u, Error: errs[i], Refused: errs[i] == "connection refused"}
	}
	return out
}

// listening is an address something accepts TCP connections on until the test ends.
func listening(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}
