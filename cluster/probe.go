package cluster

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcdmedic/etcdmedic"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Probe is what one endpoint answered. Every call has the same deadline, so a dead or hung
// endpoint costs at most one command timeout, whatever else is probed.
type Probe struct {
	Endpoint string `json:"endpoint"`
	// Discovered is true for endpoints learned from a member list, not given by the user.
	Discovered bool `json:"discovered"`
	Reached    bool `json:"reached"`
	// Refused is set when nothing listens at the endpoint (the TCP connect was refused): the
	// only answer that proves a member is not serving there.
	Refused bool               `json:"refused,omitempty"`
	Error   string             `json:"error,omitempty"`
	Status  *Status            `json:"status,omitempty"`
	Members []etcdmedic.Member `json:"members,omitempty"` // this member's own (serializable) member list
	// MembersErr is why it gave no member list (a learner is refused one).
	MembersErr string `json:"membersError,omitempty"`
	Healthy    bool   `json:"healthy"` // a linearizable read succeeded
	HealthErr  string `json:"healthError,omitempty"`
	// ReadAsked: the member was asked the linearizable read (a voter that names a leader,
	// probed with quorum).
	ReadAsked bool          `json:"readAsked,omitempty"`
	Alarms    []Alarm       `json:"alarms,omitempty"`
	Hash      *Hash         `json:"hash,omitempty"`
	Took      time.Duration `json:"tookNs"`
}

// Status is a member's answer to the Status RPC (what `etcdctl endpoint status` shows).
type Status struct {
	ClusterID      etcdmedic.ClusterID `json:"clusterID"`
	MemberID       etcdmedic.ID        `json:"memberID"`
	Leader         etcdmedic.ID        `json:"leader"` // NoID ("0") when it knows none
	RaftTerm       uint64              `json:"raftTerm"`
	RaftIndex      uint64              `json:"raftIndex"`
	AppliedIndex   uint64              `json:"raftAppliedIndex"`
	Revision       int64               `json:"revision"`
	DBSize         int64               `json:"dbSize"`
	DBSizeInUse    int64               `json:"dbSizeInUse"`
	DBSizeQuota    int64               `json:"dbSizeQuota,omitempty"` // reported from etcd v3.6 on
	Version        string              `json:"version"`
	StorageVersion string              `json:"storageVersion,omitempty"`
	IsLearner      bool                `json:"isLearner"`
	Errors         []string            `json:"errors,omitempty"`
}

// Alarm is one raised alarm.
type Alarm struct {
	MemberID etcdmedic.ID `json:"memberID"`
	Alarm    string       `json:"alarm"`
}

// Hash is a member's hashkv answer.
type Hash struct {
	Revision        int64  `json:"revision"`
	Hash            uint32 `json:"hash"`
	CompactRevision int64  `json:"compactRevision"`
	Error           string `json:"error,omitempty"`
}

// ProbeOptions tune a probe round.
type ProbeOptions struct {
	// Discover probes every client URL any member list names, not only the given endpoints.
	Discover bool
	// WithoutQuorum asks only what a member answers without quorum (status, member list) and
	// skips the health read and the alarm list, which go through raft: a member that has just
	// lost its leader still names it for up to an election timeout, and those reads would wait
	// out the whole command timeout.
	WithoutQuorum bool
	// CheckHash asks every reached member for its hashkv at one revision they all have.
	CheckHash bool
	// Now stamps the view (time.Now when nil).
	Now func() time.Time
}

// ProbeAll probes the given endpoints and, as member lists arrive, every client URL they name,
// all in parallel, all under one deadline of conn.CommandTimeout.
func ProbeAll(ctx context.Context, conn Conn, opts ProbeOptions) []*Probe {
	ctx, cancel := context.WithTimeout(ctx, conn.CommandTimeout)
	defer cancel()
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		seen   = map[string]bool{}
		probes []*Probe
	)
	var launch func(endpoint string, discovered bool)
	launch = func(endpoint string, discovered bool) {
		key := etcdmedic.Normalize(endpoint)
		mu.Lock()
		if seen[key] {
			mu.Unlock()
			return
		}
		seen[key] = true
		p := &Probe{Endpoint: endpoint, Discovered: discovered}
		probes = append(probes, p)
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Discovered members are probed as soon as a member list arrives, not when this
			// probe ends: its health read can block until an election ends.
			probeOne(ctx, conn, p, opts.WithoutQuorum, func(members []etcdmedic.Member) {
				if opts.Discover {
					for _, m := range members {
						for _, u := range m.ClientURLs {
							launch(u, true)
						}
					}
				}
			})
		}()
	}
	for _, ep := range conn.Endpoints {
		launch(ep, false)
	}
	wg.Wait()
	sort.SliceStable(probes, func(i, j int) bool {
		if probes[i].Discovered != probes[j].Discovered {
			return !probes[i].Discovered
		}
		return probes[i].Endpoint < probes[j].Endpoint
	})
	return probes
}

// probeOne asks one endpoint for its status, member list, health and alarms, in parallel.
func probeOne(ctx context.Context, conn Conn, p *Probe, withoutQuorum bool, onMembers func([]etcdmedic.Member)) {
	started := time.Now()
	defer func() { p.Took = time.Since(started) }()
	// A plain TCP connect first: a dead member refuses at once, and saying "connection
	// refused" beats waiting out gRPC's retries until the timeout.
	if hostPort, ok := tcpAddress(p.Endpoint); ok {
		if err := preflight(ctx, conn, p.Endpoint, hostPort); err != nil {
			p.Error, p.Refused = describeErr(ctx, err), errors.Is(err, syscall.ECONNREFUSED)
			return
		}
	}
	cli, err := conn.clientFor(ctx, p.Endpoint)
	if err != nil {
		p.Error = describeErr(ctx, err)
		return
	}
	defer cli.Close()
	var wg sync.WaitGroup
	var statusErr error
	wg.Go(func() {
		resp, err := cli.Status(ctx, p.Endpoint)
		if err != nil {
			statusErr = err
			return
		}
		p.Status = &Status{
			ClusterID: etcdmedic.ID(resp.Header.ClusterId), MemberID: etcdmedic.ID(resp.Header.MemberId), Leader: etcdmedic.ID(resp.Leader),
			RaftTerm: resp.RaftTerm, RaftIndex: resp.RaftIndex, AppliedIndex: resp.RaftAppliedIndex, Revision: resp.Header.Revision,
			DBSize: resp.DbSize, DBSizeInUse: resp.DbSizeInUse, DBSizeQuota: resp.DbSizeQuota,
			Version: resp.Version, StorageVersion: resp.StorageVersion, IsLearner: resp.IsLearner, Errors: resp.Errors,
		}
		// The health read and the alarm list go through raft, so they follow the status: without
		// a leader they would wait out the whole timeout, and etcd refuses both to a learner.
		switch {
		case withoutQuorum:
			p.HealthErr = errNotAsked.Error()
		case p.Status.IsLearner:
			p.HealthErr = errLearner.Error()
		case p.Status.Leader == etcdmedic.NoID:
			p.HealthErr = errNoLeader.Error()
		default:
			p.ReadAsked = true
			askQuorum(ctx, cli, p)
		}
	})
	wg.Go(func() {
		// Serializable: each member's own view, which it gives even without quorum.
		resp, err := cli.MemberList(ctx, clientv3.WithSerializable())
		if err != nil {
			p.MembersErr = describeErr(ctx, err)
			return
		}
		var members []etcdmedic.Member
		for _, m := range resp.Members {
			members = append(members, etcdmedic.Member{ID: etcdmedic.ID(m.ID), Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner})
		}
		p.Members = members
		onMembers(members)
	})
	wg.Wait()
	if statusErr != nil {
		p.Error = describeErr(ctx, statusErr)
		return
	}
	p.Reached = true
}

// askQuorum reads what only a member in the quorum answers, in parallel: health (a
// linearizable read, as etcdctl endpoint health does; "permission denied" still proves quorum)
// and the alarm list.
func askQuorum(ctx context.Context, cli *clientv3.Client, p *Probe) {
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := cli.Get(ctx, "health")
		if err == nil || errors.Is(err, rpctypes.ErrPermissionDenied) {
			p.Healthy = true
			return
		}
		p.HealthErr = describeErr(ctx, err)
	})
	wg.Go(func() {
		resp, err := cli.AlarmList(ctx)
		if err != nil {
			return
		}
		for _, a := range resp.Alarms {
			p.Alarms = append(p.Alarms, Alarm{MemberID: etcdmedic.ID(a.MemberID), Alarm: a.Alarm.String()})
		}
	})
	wg.Wait()
}

// Reach connects to endpoint once (with TLS, a handshake) within the command timeout: an
// endpoint that is down or has a certificate problem fails here with its real reason, where the
// etcd client would wait for a connection until its context ends. Unix sockets are not checked.
func (c Conn) Reach(ctx context.Context, endpoint string) error {
	hostPort, ok := tcpAddress(endpoint)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(c.CommandTimeout, 5*time.Second))
	defer cancel()
	if err := preflight(ctx, c, endpoint, hostPort); err != nil {
		return fmt.Errorf("%s: %s", endpoint, describeErr(ctx, err))
	}
	return nil
}

// errNoLeader is the health of a member whose status names no leader.
var errNoLeader = errors.New("no leader: the member's status names none (quorum lost or an election under way)")

// errLearner is the health of a learner: etcd serves learners only status and serializable
// reads ("rpc not supported for learner").
var errLearner = errors.New("not asked (etcd serves a learner no linearizable read)")

// ReadFailed is true when the member was asked a linearizable read (a voter that names a
// leader) and it failed: it is cut off from the leader, or too busy to answer in time.
func (p *Probe) ReadFailed() bool { return p.Reached && p.ReadAsked && !p.Healthy }

// errNotAsked is the health of a member probed WithoutQuorum.
var errNotAsked = errors.New("not asked (probed for what a member answers without quorum)")

// preflight connects (and, with TLS, shakes hands) once: a dead member refuses at once, and
// a wrong CA or a missing client certificate gets its real reason, where the etcd client would
// only time out. An https endpoint gets TLS without TLS flags too, with the system's roots, as
// the etcd client (and etcdctl) does.
func preflight(ctx context.Context, conn Conn, endpoint, hostPort string) error {
	d := &net.Dialer{}
	cfg, err := conn.tlsConfig()
	if err == nil && cfg == nil && securedScheme(endpoint) {
		cfg = &tls.Config{}
	}
	if err != nil || cfg == nil {
		c, err := d.DialContext(ctx, "tcp", hostPort)
		if err == nil {
			c.Close()
		}
		return err
	}
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(hostPort); err == nil {
			cfg.ServerName = host
		}
	}
	c, err := (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", hostPort)
	if err != nil {
		return err
	}
	defer c.Close()
	return afterHandshake(ctx, c)
}

// afterHandshake reads briefly from a connection whose TLS handshake completed: with TLS 1.3
// the client finishes before the server has checked its certificate, and a server that wants
// one (or refuses it) says so only in an alert ("tls: certificate required"). Silence or data
// (gRPC's settings frame) means the server took it.
func afterHandshake(ctx context.Context, c net.Conn) error {
	deadline := time.Now().Add(200 * time.Millisecond)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.SetReadDeadline(deadline)
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	if err == nil || errors.Is(err, io.EOF) || (errors.As(err, &ne) && ne.Timeout()) {
		return nil
	}
	return err
}

// securedScheme reports whether an endpoint asks for TLS by its scheme.
func securedScheme(endpoint string) bool {
	return strings.HasPrefix(endpoint, "https://") || strings.HasPrefix(endpoint, "unixs://")
}

// tcpAddress returns host:port of a TCP endpoint ("unix://" endpoints have none).
func tcpAddress(ep string) (string, bool) {
	if strings.HasPrefix(ep, "unix://") || strings.HasPrefix(ep, "unixs://") {
		return "", false
	}
	if u, err := url.Parse(ep); err == nil && u.Host != "" {
		return u.Host, true
	}
	return etcdmedic.Normalize(ep), true
}

// describeErr says what went wrong in the operator's words.
func describeErr(ctx context.Context, err error) string {
	msg := err.Error()
	if ctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || strings.Contains(msg, "DeadlineExceeded") || strings.Contains(msg, "context deadline exceeded")) {
		// gRPC keeps the last reason it could not connect (a TLS or auth failure) in the
		// deadline's message: that is the cause, not the timeout.
		if _, last, ok := strings.Cut(msg, "latest balancer error: "); ok {
			return "no answer within the command timeout (last connection error: " + firstLine(last) + ")"
		}
		return "no answer within the command timeout"
	}
	switch {
	case strings.Contains(msg, "connection refused"):
		return "connection refused"
	case strings.Contains(msg, "certificate signed by unknown authority"), strings.Contains(msg, "x509:"):
		return "TLS: " + firstLine(msg)
	}
	return firstLine(msg)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// HashAll asks every reached member for hashkv at one revision, in parallel, under one timeout.
func HashAll(ctx context.Context, conn Conn, probes []*Probe, revision int64) {
	ctx, cancel := context.WithTimeout(ctx, conn.CommandTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range probes {
		if !p.Reached || p.Status.IsLearner {
			continue
		}
		wg.Go(func() {
			cli, err := conn.clientFor(ctx, p.Endpoint)
			if err != nil {
				p.Hash = &Hash{Revision: revision, Error: describeErr(ctx, err)}
				return
			}
			defer cli.Close()
			resp, err := cli.HashKV(ctx, p.Endpoint, revision)
			if err != nil {
				p.Hash = &Hash{Revision: revision, Error: describeErr(ctx, err)}
				return
			}
			p.Hash = &Hash{Revision: revision, Hash: resp.Hash, CompactRevision: resp.CompactRevision}
		})
	}
	wg.Wait()
}
