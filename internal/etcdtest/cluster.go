package etcdtest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ClusterSpec describes a cluster for NewCluster.
type ClusterSpec struct {
	// Size is the number of members; 0 means len(Versions), or 1.
	Size int
	// Version every member runs; "" means Linked.
	Version string
	// Versions gives each member its own version, m1 first; it overrides Version.
	Versions []string
	// ExtraFlags are appended to every member's etcd flags (for a repeated flag etcd keeps the
	// last). Never --experimental-* flags: etcd 3.7 removed them.
	ExtraFlags []string
	// SnapshotCount sets --snapshot-count; 0 keeps etcd's default.
	SnapshotCount int
	// Dir holds the members' data dirs and logs; "" means t.TempDir().
	Dir string
	// ReadyTimeout bounds the wait for the cluster to become healthy; 0 means 30 s.
	ReadyTimeout time.Duration
	// TLS, when set, gives every member https client and peer URLs with mutual TLS on both
	// (see NewCerts), and every client the harness makes uses TLS.TLSInfo.
	TLS *Certs
	// PeerProxies puts a TCP proxy on 127.0.0.1 in front of every member's peer port, members
	// added later too: members advertise the proxy's URL (Member.PeerURL, what the member list
	// shows) and reach each other only through the proxies, so Member.Isolate can partition a
	// member without root. The proxies live as long as the cluster.
	PeerProxies bool
}

// Cluster is a set of etcd processes on 127.0.0.1 that form one etcd cluster.
type Cluster struct {
	// Dir holds <name>.etcd data dirs and <name>.log logs.
	Dir string
	// Token is the cluster's --initial-cluster-token, unique per cluster.
	Token string

	spec      ClusterSpec
	clientTLS *tls.Config // of every client the harness makes; nil without spec.TLS

	mu      sync.Mutex
	members []*Member    // current members, in order of creation
	started []*Member    // every member ever created, removed ones too: cleanup kills them all
	proxies []*peerProxy // every peer proxy ever started (ClusterSpec.PeerProxies): cleanup closes them
	closed  bool

	isolations atomic.Int32 // how many members Isolate cut off

	logsShown atomic.Bool // an error already carried every member's log tail
}

// NewCluster starts a cluster of spec.Size members m1, m2, ... and waits until every member is
// ready and a linearizable read succeeds. On failure the test fails with each member's log
// tail. Every process is killed when the test ends.
func NewCluster(t testing.TB, spec ClusterSpec) *Cluster {
	t.Helper()
	versions, err := spec.memberVersions()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions { // build binaries before the ready clock starts
		Binary(t, v)
	}
	dir := spec.Dir
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("cluster dir: %v", err)
	}
	clientTLS, err := spec.TLS.clientConfig()
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, spec: spec, clientTLS: clientTLS}
	t.Cleanup(func() { c.cleanup(t) })

	for attempt := 1; ; attempt++ {
		err := c.bootstrap(versions)
		if err == nil {
			break
		}
		// Ports are free when chosen but can be taken before etcd binds them: retry once.
		if attempt == 1 && c.bindFailed() {
			t.Logf("etcdtest: a port was taken before etcd bound it, retrying with new ports: %v", err)
			if err := c.reset(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Fatalf("start %d-member cluster in %s: %v", len(versions), dir, err)
	}
	if err := c.learnIDs(); err != nil {
		t.Fatal(err)
	}
	return c
}

func (s ClusterSpec) memberVersions() ([]string, error) {
	size := s.Size
	if size == 0 {
		size = max(len(s.Versions), 1)
	}
	if len(s.Versions) > 0 {
		if len(s.Versions) != size {
			return nil, fmt.Errorf("cluster spec: Size %d but %d Versions", s.Size, len(s.Versions))
		}
		return slices.Clone(s.Versions), nil
	}
	v := s.Version
	if v == "" {
		v = Linked
	}
	versions := make([]string, size)
	for i := range versions {
		versions[i] = v
	}
	return versions, nil
}

func (s ClusterSpec) readyTimeout() time.Duration {
	if s.ReadyTimeout > 0 {
		return s.ReadyTimeout
	}
	return defaultReadyTimeout
}

// defaultVersion is the version AddMember uses when none is given.
func (s ClusterSpec) defaultVersion() string {
	if s.Version != "" {
		return s.Version
	}
	if len(s.Versions) > 0 {
		return s.Versions[len(s.Versions)-1]
	}
	return Linked
}

// bootstrap creates and starts one member per version with --initial-cluster-state=new and
// waits for all of them.
func (c *Cluster) bootstrap(versions []string) error {
	token, err := randomToken()
	if err != nil {
		return err
	}
	ports, err := freePorts(2 * len(versions))
	if err != nil {
		return err
	}
	c.Token = token
	var members []*Member
	var initial []string
	for i, v := range versions {
		name := fmt.Sprintf("m%d", i+1)
		m, err := c.newMember(name, v, ports[2*i], ports[2*i+1])
		if err != nil {
			return err
		}
		members = append(members, m)
		initial = append(initial, name+"="+m.PeerURL)
	}
	for _, m := range members {
		m.baseFlags = c.memberFlags(m, strings.Join(initial, ","), "new")
	}
	c.mu.Lock()
	c.members = members
	c.started = append(c.started, members...)
	c.mu.Unlock()
	for _, m := range members {
		if err := m.Start(); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.spec.readyTimeout())
	defer cancel()
	return c.waitHealthy(ctx)
}

// newMember describes a member that listens on clientPort and peerPort; with PeerProxies it
// starts the member's peer proxy, whose URL the member advertises.
func (c *Cluster) newMember(name, version string, clientPort, peerPort int) (*Member, error) {
	scheme := c.spec.TLS.scheme()
	m := &Member{
		Name:      name,
		DataDir:   filepath.Join(c.Dir, name+".etcd"),
		LogPath:   filepath.Join(c.Dir, name+".log"),
		ClientURL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, clientPort),
		PeerURL:   fmt.Sprintf("%s://127.0.0.1:%d", scheme, peerPort),
		Version:   version,
		cluster:   c,
	}
	m.listenPeerURL = m.PeerURL
	if c.spec.PeerProxies {
		p, err := startPeerProxy(m, peerPort)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.proxies = append(c.proxies, p)
		c.mu.Unlock()
		m.proxy = p
		m.PeerURL = fmt.Sprintf("%s://127.0.0.1:%d", scheme, p.port())
	}
	return m, nil
}

// memberFlags are the etcd flags that give m its identity, its TLS and bootstrap it. They
// exist with the same meaning in etcd 3.5, 3.6 and 3.7.
func (c *Cluster) memberFlags(m *Member, initialCluster, state string) []string {
	flags := []string{
		"--name=" + m.Name,
		"--data-dir=" + m.DataDir,
		"--listen-client-urls=" + m.ClientURL,
		"--advertise-client-urls=" + m.ClientURL,
		"--listen-peer-urls=" + m.listenPeerURL,
		"--initial-advertise-peer-urls=" + m.PeerURL,
		"--initial-cluster=" + initialCluster,
		"--initial-cluster-state=" + state,
		"--initial-cluster-token=" + c.Token,
		"--logger=zap",
		"--log-outputs=stderr",
	}
	if c.spec.SnapshotCount > 0 {
		flags = append(flags, "--snapshot-count="+strconv.Itoa(c.spec.SnapshotCount))
	}
	return append(flags, c.spec.TLS.etcdFlags()...)
}

// waitHealthy waits until every member is ready and a linearizable read through all of them
// succeeds; it gives up early when a member exits.
func (c *Cluster) waitHealthy(ctx context.Context) error {
	members := c.Members()
	clients := make([]*clientv3.Client, len(members))
	for i, m := range members {
		cli, err := c.newClient([]string{m.ClientURL})
		if err != nil {
			return err
		}
		defer cli.Close()
		clients[i] = cli
	}
	started := time.Now()
	ready := make([]bool, len(members))
	lastErr := make([]error, len(members))
	for {
		allReady := true
		for i, m := range members {
			if !m.IsRunning() {
				return c.describe(fmt.Sprintf("member %s exited during start (%s)", m.Name, m.exitState()))
			}
			if !ready[i] {
				lastErr[i] = probeReady(ctx, clients[i], m.ClientURL)
				ready[i] = lastErr[i] == nil
				allReady = allReady && ready[i]
			}
		}
		if allReady {
			break
		}
		select {
		case <-ctx.Done():
			var waiting []string
			for i, m := range members {
				if !ready[i] {
					waiting = append(waiting, fmt.Sprintf("%s: %v", m.Name, lastErr[i]))
				}
			}
			return c.describe(fmt.Sprintf("not healthy after %s; not ready: %s", time.Since(started).Round(time.Millisecond), strings.Join(waiting, "; ")))
		case <-time.After(200 * time.Millisecond):
		}
	}
	cli, err := c.newClient(c.Endpoints())
	if err != nil {
		return err
	}
	defer cli.Close()
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Get(rctx, "etcdtest/health")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return c.describe(fmt.Sprintf("linearizable read through %v: %v", c.Endpoints(), err))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// describe returns an error carrying msg and the last 30 log lines of every member.
func (c *Cluster) describe(msg string) error {
	c.logsShown.Store(true)
	var b strings.Builder
	b.WriteString(msg)
	for _, m := range c.Members() {
		fmt.Fprintf(&b, "\n--- %s (%s, %s) last lines of %s:\n%s", m.Name, m.Version, m.exitState(), m.LogPath, indent(m.LogTail(30)))
	}
	return fmt.Errorf("%s", b.String())
}

// bindFailed reports whether a member exited because its address was taken.
func (c *Cluster) bindFailed() bool {
	for _, m := range c.Members() {
		if !m.IsRunning() && strings.Contains(m.LogTail(50), "address already in use") {
			return true
		}
	}
	return false
}

// reset kills every member and removes their data dirs, for a fresh bootstrap.
func (c *Cluster) reset() error {
	for _, m := range c.Members() {
		if err := m.Kill(); err != nil {
			return err
		}
		if err := os.RemoveAll(m.DataDir); err != nil {
			return fmt.Errorf("remove data dir of %s: %w", m.Name, err)
		}
		if m.proxy != nil {
			m.proxy.close()
		}
	}
	c.mu.Lock()
	c.members = nil
	c.mu.Unlock()
	return nil
}

// learnIDs fills in each member's ID from the member list.
func (c *Cluster) learnIDs() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.memberList(ctx)
	if err != nil {
		return err
	}
	for _, m := range c.Members() {
		for _, pm := range list {
			if pm.Name == m.Name {
				m.ID = pm.ID
			}
		}
		if m.ID == 0 {
			return c.describe(fmt.Sprintf("member %s is not in the member list %v", m.Name, list))
		}
	}
	return nil
}

func randomToken() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("cluster token: %w", err)
	}
	return "etcdtest-" + hex.EncodeToString(b), nil
}

// cleanup kills every process the cluster started and waits for each; on a failed test it
// logs every member's log tail first (unless an error already did), since the logs go away
// with the temp dir.
func (c *Cluster) cleanup(t testing.TB) {
	c.mu.Lock()
	c.closed = true
	all := slices.Clone(c.started)
	c.mu.Unlock()
	if t.Failed() && !c.logsShown.Load() {
		for _, m := range all {
			t.Logf("etcdtest: %s (%s, %s) last lines of %s:\n%s", m.Name, m.Version, m.exitState(), m.LogPath, indent(m.LogTail(30)))
		}
	}
	for _, m := range all {
		if err := m.Kill(); err != nil {
			t.Errorf("etcdtest cleanup: %v", err)
		}
	}
	for _, p := range c.peerProxies() {
		p.close()
	}
}

func (c *Cluster) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Members returns the cluster's current members (not removed ones), in order of creation.
func (c *Cluster) Members() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.members)
}

// Member returns the current member called name, or nil.
func (c *Cluster) Member(name string) *Member {
	for _, m := range c.Members() {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Endpoints returns the client URLs of the running members, learners left out: a learner
// refuses writes, linearizable reads and membership changes.
func (c *Cluster) Endpoints() []string {
	return c.endpointsExcept(nil)
}

// endpointsExcept is Endpoints without except.
func (c *Cluster) endpointsExcept(except *Member) []string {
	var eps []string
	for _, m := range c.Members() {
		if m != except && m.IsRunning() && !m.learner.Load() {
			eps = append(eps, m.ClientURL)
		}
	}
	return eps
}

// Client returns a client over every running member but learners (see Endpoints), over TLS
// with the client cert when the cluster has TLS, closed when t ends.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return c.ClientExcept(t, nil)
}

// ClientExcept is Client without except: the side of a partition that has the quorum, say.
func (c *Cluster) ClientExcept(t testing.TB, except *Member) *clientv3.Client {
	t.Helper()
	eps := c.endpointsExcept(except)
	if len(eps) == 0 {
		t.Fatal("etcdtest: no running member to connect to")
	}
	cli, err := c.newClient(eps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// MemberList returns the cluster's member list (a linearizable read, so it needs quorum),
// retrying for up to 10 s.
func (c *Cluster) MemberList(t testing.TB) []*etcdserverpb.Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.memberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func (c *Cluster) memberList(ctx context.Context) ([]*etcdserverpb.Member, error) {
	cli, err := c.newClient(c.Endpoints())
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	var lastErr error
	for range 100 {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := cli.MemberList(rctx)
		cancel()
		if err == nil {
			return resp.Members, nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, c.describe(fmt.Sprintf("member list: %v", lastErr))
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil, c.describe(fmt.Sprintf("member list: %v", lastErr))
}

// MemberStatus is one member's answer to Status, or why it gave none.
type MemberStatus struct {
	Member *Member
	Status *clientv3.StatusResponse
	Err    error
}

// Statuses asks every current member for its status, 2 s each, in parallel.
func (c *Cluster) Statuses(ctx context.Context) []MemberStatus {
	members := c.Members()
	out := make([]MemberStatus, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		out[i].Member = m
		if !m.IsRunning() {
			out[i].Err = fmt.Errorf("member %s is not running", m.Name)
			continue
		}
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			out[i].Status, out[i].Err = m.Status(sctx)
		})
	}
	wg.Wait()
	return out
}

// Leader returns the member that the running members name as leader, waiting up to 10 s for
// one.
func (c *Cluster) Leader(t testing.TB) *Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var seen []string
	for range 50 {
		seen = seen[:0]
		for _, s := range c.Statuses(ctx) {
			if s.Err != nil {
				seen = append(seen, s.Err.Error())
				continue
			}
			seen = append(seen, fmt.Sprintf("%s says leader %x", s.Member.Name, s.Status.Leader))
			for _, m := range c.Members() {
				if s.Status.Leader != 0 && m.ID == s.Status.Leader && m.IsRunning() {
					return m
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal(c.describe("no leader after 10 s: " + strings.Join(seen, "; ")))
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatal(c.describe("no leader: " + strings.Join(seen, "; ")))
	return nil
}

// nudgeKey is written while waiting for a member: an idle cluster can leave a new member
// stalled until some write happens (etcd-facts.md, "A new member can stall forever").
const nudgeKey = "etcdtest/nudge"

// nudge writes nudgeKey through the running voters other than except; best effort, 1 s.
func (c *Cluster) nudge(ctx context.Context, except *Member) {
	eps := c.endpointsExcept(except)
	if len(eps) == 0 {
		return
	}
	cli, err := c.newClient(eps)
	if err != nil {
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, _ = cli.Put(ctx, nudgeKey, time.Now().Format(time.RFC3339Nano))
}
