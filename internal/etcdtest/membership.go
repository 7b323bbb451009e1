package etcdtest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/cluster"
)

// Errors etcd returns for a reconfiguration it refuses for now but would accept later.
const (
	// Strict reconfig check: not every voter has been connected for 5 s, e.g. right after a
	// promote or a restart.
	errUnhealthyCluster = "etcdserver: unhealthy cluster"
	// The change would leave fewer started members than a quorum.
	errNotEnoughStarted = "etcdserver: re-configuration failed due to not enough started members"
	// Promotion before the learner has caught up with the leader.
	errLearnerNotReady = "etcdserver: can only promote a learner member which is in sync with leader"
)

const (
	// reconfigRetryTimeout bounds the retries of MemberAdd and MemberRemove.
	reconfigRetryTimeout = 15 * time.Second
	// promoteTimeout bounds PromoteMember; a learner's first publish alone takes ~7 s.
	promoteTimeout = 30 * time.Second
)

// AddOptions describe a member for AddMember.
type AddOptions struct {
	// Learner adds the member as a non-voting learner (MemberAddAsLearner).
	Learner bool
	// Version the new member runs; "" means the cluster's Version (or its last member's).
	Version string
	// ExtraFlags are the member's own extra etcd flags, after the cluster's ExtraFlags.
	ExtraFlags []string
	// DataDir is the member's data dir; "" means <cluster dir>/<name>.etcd. When re-adding the
	// name of a removed member, that dir still holds the old member's data and etcd starts on
	// it (the stale-data incident): remove it first, or give another dir, for a clean join.
	DataDir string
}

// AddMember adds a member called name through the API (retrying "unhealthy cluster" for up to
// 15 s), starts it with --initial-cluster-state=existing, and waits until it serves, writing a
// harmless key meanwhile so it cannot stall on an idle cluster.
func (c *Cluster) AddMember(t testing.TB, name string, opts AddOptions) *Member {
	t.Helper()
	for _, m := range c.Members() {
		if m.Name == name {
			t.Fatalf("add member %s: the cluster already has a member of that name", name)
		}
	}
	version := opts.Version
	if version == "" {
		version = c.spec.defaultVersion()
	}
	Binary(t, version) // build before the clocks start
	ports, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.newMember(name, version, ports[0], ports[1])
	if err != nil {
		t.Fatal(err)
	}
	if opts.DataDir != "" {
		m.DataDir = opts.DataDir
	}
	m.extraFlags = append([]string(nil), opts.ExtraFlags...)
	m.learner.Store(opts.Learner)

	c.waitClusterVersion(t)
	cli, err := c.newClient(c.Endpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var added *clientv3.MemberAddResponse
	err = retryReconfig(t, "add member "+name, reconfigRetryTimeout, func(ctx context.Context) error {
		var err error
		if opts.Learner {
			added, err = cli.MemberAddAsLearner(ctx, []string{m.PeerURL})
		} else {
			added, err = cli.MemberAdd(ctx, []string{m.PeerURL})
		}
		return err
	})
	if err != nil {
		t.Fatal(c.describe(fmt.Sprintf("add member %s (%s, learner=%t): %v", name, m.PeerURL, opts.Learner, err)))
	}
	m.ID = added.Member.ID
	m.baseFlags = c.memberFlags(m, c.initialCluster(added.Members, m), "existing")

	c.mu.Lock()
	c.members = append(c.members, m)
	c.started = append(c.started, m)
	c.mu.Unlock()
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), c.spec.readyTimeout())
	defer cancel()
	if err := m.WaitReady(ctx); err != nil {
		t.Fatal(fmt.Errorf("added member %s: %w", name, err))
	}
	return m
}

// initialCluster is the --initial-cluster of a joining member: every member of the list, the
// new one under its name, unstarted others (no name yet) under the harness's name for them.
func (c *Cluster) initialCluster(list []*etcdserverpb.Member, joining *Member) string {
	var parts []string
	for _, pm := range list {
		name := pm.Name
		if pm.ID == joining.ID {
			name = joining.Name
		}
		if name == "" {
			name = c.nameForPeerURLs(pm.PeerURLs)
		}
		if name == "" {
			name = fmt.Sprintf("unstarted-%x", pm.ID)
		}
		for _, u := range pm.PeerURLs {
			parts = append(parts, name+"="+u)
		}
	}
	return strings.Join(parts, ",")
}

func (c *Cluster) nameForPeerURLs(urls []string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.started {
		for _, u := range urls {
			if m.PeerURL == u {
				return m.Name
			}
		}
	}
	return ""
}

// PromoteMember promotes the learner m to a voter. etcd refuses until the learner has caught
// up with the leader, and an idle learner may never catch up, so between tries it writes a
// harmless key; it gives up after 30 s.
func (c *Cluster) PromoteMember(t testing.TB, m *Member) {
	t.Helper()
	cli, err := c.newClient(c.endpointsExcept(m))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), promoteTimeout)
	defer cancel()
	started := time.Now()
	var lastErr error
	for refusals := 0; refusals < 200; refusals++ {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.MemberPromote(rctx, m.ID)
		rcancel()
		if err == nil {
			m.learner.Store(false)
			if refusals > 0 {
				t.Logf("etcdtest: promote %s: done after %d refusals in %s (last: %v)", m.Name, refusals, time.Since(started).Round(time.Millisecond), lastErr)
			}
			return
		}
		lastErr = err
		if !isRetryable(err, errLearnerNotReady) {
			break
		}
		c.nudge(ctx, m)
		if !sleepCtx(ctx, 300*time.Millisecond) {
			break
		}
	}
	t.Fatal(m.errorf("not promoted: %v", lastErr))
}

// clusterVersionTimeout bounds waitClusterVersion.
const clusterVersionTimeout = 30 * time.Second

// waitClusterVersion waits until every running member has decided the cluster version. etcd
// v3.5 refuses to start a member that joins before that ("incompatible with current running
// cluster": its peers' cluster version is "not_decided"), and a first member decides it some
// seconds after it starts, later on a loaded machine (CI-32). After clusterVersionTimeout it
// logs what it saw and lets the add go on.
func (c *Cluster) waitClusterVersion(t testing.TB) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: c.clientTLS}}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(clusterVersionTimeout)
	for {
		undecided := ""
		for _, m := range c.Members() {
			if !m.IsRunning() {
				continue
			}
			if v, err := cluster.ServedVersions(t.Context(), hc, m.ClientURL); err != nil || !cluster.Decided(v) {
				undecided = fmt.Sprintf("%s: %+v (%v)", m.Name, v, err)
				break
			}
		}
		if undecided == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Logf("etcdtest: the cluster version is still not decided after %s (%s): adding the member anyway", clusterVersionTimeout, undecided)
			return
		}
		if !sleepCtx(t.Context(), 200*time.Millisecond) {
			return
		}
	}
}

// RemoveMember removes m from the cluster through the API (retrying "unhealthy cluster" for up
// to 15 s) and stops its process: a running m gets up to removedExitTimeout to stop by itself,
// as etcd does once it has applied its own removal or heard of it from its peers, so that its
// data dir is what etcd left. m stays usable, e.g. to restart it on its stale data.
func (c *Cluster) RemoveMember(t testing.TB, m *Member) {
	t.Helper()
	eps := c.endpointsExcept(m)
	if len(eps) == 0 {
		t.Fatalf("remove member %s: no other running member to ask", m.Name)
	}
	cli, err := c.newClient(eps)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	err = retryReconfig(t, "remove member "+m.Name, reconfigRetryTimeout, func(ctx context.Context) error {
		_, err := cli.MemberRemove(ctx, m.ID)
		return err
	})
	if err != nil {
		t.Fatal(c.describe(fmt.Sprintf("remove member %s (%x): %v", m.Name, m.ID, err)))
	}
	c.mu.Lock()
	for i, o := range c.members {
		if o == m {
			c.members = append(c.members[:i], c.members[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	if m.IsRunning() {
		ctx, cancel := context.WithTimeout(t.Context(), removedExitTimeout)
		_, _ = m.WaitExit(ctx)
		cancel()
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
}

// removedExitTimeout bounds the wait for a removed member to stop by itself (etcd waits a
// second after applying its removal).
const removedExitTimeout = 10 * time.Second

// MoveLeader makes to the leader (etcd's MoveLeader, asked of the current leader), trying again
// for up to 30 s while leadership moves. A leader removed from its cluster applies its own
// removal, and its data dir says so; a follower can be cut off before it hears that the
// removal committed.
func (c *Cluster) MoveLeader(t testing.TB, to *Member) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		leader := c.Leader(t)
		if leader == to {
			return
		}
		err = c.askMoveLeader(t.Context(), leader, to)
		if !sleepCtx(t.Context(), 200*time.Millisecond) {
			break
		}
	}
	t.Fatal(c.describe(fmt.Sprintf("move the leader to %s: still not the leader after 30 s (last: %v)", to.Name, err)))
}

func (c *Cluster) askMoveLeader(ctx context.Context, leader, to *Member) error {
	cli, err := c.newClient([]string{leader.ClientURL})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = cli.MoveLeader(ctx, to.ID)
	return err
}

// retryReconfig runs op (5 s per try) until it succeeds, fails with an error that is not
// temporary, or timeout passes; backoff 200 ms doubling to 2 s. Timeouts are not retried: the
// change may have been applied. It logs the first refusal and how long it took to pass.
func retryReconfig(t testing.TB, what string, timeout time.Duration, op func(context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	started := time.Now()
	wait := 200 * time.Millisecond
	var err error
	for refusals := 0; refusals < 50; refusals++ {
		octx, ocancel := context.WithTimeout(ctx, 5*time.Second)
		err = op(octx)
		ocancel()
		if err == nil && refusals > 0 {
			t.Logf("etcdtest: %s: done after %d refusals in %s", what, refusals, time.Since(started).Round(time.Millisecond))
		}
		if err == nil || !isRetryable(err) {
			return err
		}
		if refusals == 0 {
			t.Logf("etcdtest: %s: %v; retrying for up to %s", what, err, timeout)
		}
		if !sleepCtx(ctx, wait) {
			return fmt.Errorf("still refused after %s: %w", timeout, err)
		}
		wait = min(2*wait, 2*time.Second)
	}
	return err
}

// isRetryable reports whether err is a refusal that passes with time.
func isRetryable(err error, more ...string) bool {
	msg := err.Error()
	// A member promoted a moment ago may not have applied its own promotion yet, and still
	// refuses the request as a learner: the next try reaches it (or another member) later.
	for _, s := range append([]string{errUnhealthyCluster, errNotEnoughStarted, "rpc not supported for learner"}, more...) {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// sleepCtx sleeps for d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
