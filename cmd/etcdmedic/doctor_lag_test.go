package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/finding"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// A follower cut off from its peers while the others keep committing: doctor names it as
// lagging, with the leader's and its own index, still shows its status (it answers clients),
// and the finding clears once the network heals and the follower catches up.
func TestDoctorMemberLagging(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, PeerProxies: true})
	all := c.Endpoints()
	leader := c.Leader(t)
	var follower *etcdtest.Member
	for _, m := range c.Members() {
		if m != leader {
			follower = m
			break
		}
	}

	if err := follower.Isolate(); err != nil {
		t.Fatal(err)
	}
	const writes = 500
	writeConcurrently(t, c.ClientExcept(t, follower), writes, follower.Name)
	logStatuses(t, c, "isolated")

	code, d := waitDoctor(t, all, func(d doctorJSON) bool { return d.find(finding.IDMemberLagging) != nil }, "--lag-entries", "100")
	t.Logf("doctor while %s is isolated: exit %d, findings %s", follower.Name, code, d.ids())
	f := wantDoctorFinding(t, d, finding.IDMemberLagging, finding.Warning)
	if !strings.HasPrefix(f.Subject, follower.Name) {
		t.Errorf("lagging member is %q, want %s", f.Subject, follower.Name)
	}
	lead, applied := evidenceNumber(t, f, "leader raft index"), evidenceNumber(t, f, " applied index")
	if lead < applied+writes {
		t.Errorf("evidence says the leader is at %d and %s at %d: less than the %d writes apart", lead, follower.Name, applied, writes)
	}
	// While it still names the leader (it hears it, or its election timeout has not passed),
	// a failed read alone does not take it out of the quorum, which a busy cluster's timed-out
	// reads would do to healthy voters: a warning. Once it names none, it is out (below).
	want := exitFindings
	for _, m := range d.Members {
		if m.Name == follower.Name && m.State == string(cluster.StateCutOff) {
			want = exitCritical
		}
	}
	if code != want {
		t.Errorf("a lagging follower on a cluster with quorum: exit %d, want %d; %s", code, want, d.ids())
	}
	for _, m := range d.Members {
		if m.Name == follower.Name && (m.Probe == nil || !m.Probe.Reached || m.Probe.Status == nil || m.Probe.Status.RaftIndex == 0) {
			t.Errorf("doctor lost the isolated member's status though it answers on its client port: %+v", m.Probe)
		}
	}

	// Past an election timeout the follower knows it is cut off: it names no leader and its
	// status carries an error, yet it still answers and still lags.
	waitNoLeader(t, follower)
	logStatuses(t, c, "isolated, leader lost")
	started := time.Now()
	code, d = doctor(t, all, "--lag-entries", "100")
	t.Logf("doctor once %s knows no leader: exit %d after %s, findings %s", follower.Name, code, time.Since(started).Round(time.Millisecond), d.ids())
	wantDoctorFinding(t, d, finding.IDMemberLagging, finding.Warning)
	if f := wantDoctorFinding(t, d, finding.IDMemberCutOff, finding.Warning); !strings.HasPrefix(f.Subject, follower.Name) {
		t.Errorf("cut-off member is %q, want %s", f.Subject, follower.Name)
	}
	// Now out of the quorum (review item 2): two of three voters commit, one more failure stops
	// writes.
	if code != exitCritical || d.find(finding.IDQuorumAtRisk) == nil {
		t.Errorf("a follower that knows no leader: exit %d, want %d with quorum-at-risk; %s", code, exitCritical, d.ids())
	}

	follower.Heal()
	started = time.Now()
	code, d = waitDoctor(t, all, func(d doctorJSON) bool { return len(d.Findings) == 0 }, "--lag-entries", "100")
	t.Logf("doctor clean %s after healing (exit %d)", time.Since(started).Round(time.Millisecond), code)
	logStatuses(t, c, "healed")
}

// Review item 2: a follower partitioned from its peers still answers clients, but it is not in
// the quorum: only two of three voters commit, so quorum is at risk (exit 2), and removing
// another healthy voter is refused by etcdmedic's own check before etcd is asked.
func TestDoctorPartitionedVoterPutsQuorumAtRisk(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, PeerProxies: true})
	all := c.Endpoints()
	leader := c.Leader(t)
	var cut, other *etcdtest.Member
	for _, m := range c.Members() {
		switch {
		case m == leader:
		case cut == nil:
			cut = m
		default:
			other = m
		}
	}
	if err := cut.Isolate(); err != nil {
		t.Fatal(err)
	}
	code, d := waitDoctor(t, all, func(d doctorJSON) bool { return d.find(finding.IDQuorumAtRisk) != nil })
	t.Logf("doctor while %s is isolated: exit %d, quorum %+v, findings %s", cut.Name, code, d.Quorum, d.ids())
	if code != exitCritical || d.Quorum.InQuorum != 2 || d.Quorum.VotersUp != 3 || d.Quorum.Voters != 3 {
		t.Errorf("one of three voters partitioned: exit %d, quorum %+v", code, d.Quorum)
	}
	if f := wantDoctorFinding(t, d, finding.IDMemberCutOff, finding.Warning); !strings.HasPrefix(f.Subject, cut.Name) {
		t.Errorf("cut-off member is %q, want %s", f.Subject, cut.Name)
	}
	code, _, errOut := runCLI(t, "member", "remove", other.Name, "--endpoints", strings.Join(all, ","), "--command-timeout", "3s")
	if code != exitCritical || !strings.Contains(errOut, "would leave 1 of 2 voters up") {
		t.Fatalf("remove %s while %s is cut off: exit %d: %s", other.Name, cut.Name, code, errOut)
	}
	cut.Heal()
	if n := len(c.MemberList(t)); n != 3 {
		t.Fatalf("a refused removal changed the membership: %d members", n)
	}
}

// writeConcurrently puts n keys through cli from 10 clients at once and fails the test if one
// is refused. Under load a put waits for its fsyncs; concurrent puts share them, as a busy
// cluster's do: 500 puts one after another once took longer than a minute on 2 busy cores.
func writeConcurrently(t *testing.T, cli *clientv3.Client, n int, cutOff string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for i := range next {
				if _, err := cli.Put(ctx, fmt.Sprintf("lag/%04d", i), "v"); err != nil {
					errs <- fmt.Errorf("write %d through the members other than %s: %w", i, cutOff, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// waitNoLeader waits up to 10 s until m's own status names no leader.
func waitNoLeader(t *testing.T, m *etcdtest.Member) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		st, err := m.Status(ctx)
		cancel()
		if err == nil && st.Leader == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still names a leader after 10 s cut off from its peers (status %v, err %v)", m.Name, st, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// evidenceNumber returns the number in the finding's evidence whose label contains what.
func evidenceNumber(t *testing.T, f *finding.Finding, what string) uint64 {
	t.Helper()
	for _, e := range f.Evidence {
		if strings.Contains(e.What, what) {
			n, err := strconv.ParseUint(e.Value, 10, 64)
			if err != nil {
				t.Fatalf("evidence %q=%q: %v", e.What, e.Value, err)
			}
			return n
		}
	}
	t.Fatalf("no evidence %q in %s", what, evidenceOf(f))
	return 0
}

// logStatuses logs what each member says of itself, for the record of what etcd showed.
func logStatuses(t *testing.T, c *etcdtest.Cluster, when string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for _, s := range c.Statuses(ctx) {
		if s.Err != nil {
			t.Logf("%s: %s: %v", when, s.Member.Name, s.Err)
			continue
		}
		t.Logf("%s: %s says leader %x, term %d, raft index %d, applied %d, errors %v",
			when, s.Member.Name, s.Status.Leader, s.Status.RaftTerm, s.Status.RaftIndex, s.Status.RaftAppliedIndex, s.Status.Errors)
	}
}
