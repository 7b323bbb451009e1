package etcdtest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

const (
	// proxyDialTimeout bounds the proxy's connect to its member's peer port; loopback answers
	// at once unless the member is down.
	proxyDialTimeout = 2 * time.Second
	// maxProxyConns bounds one proxy's open connections, and so its goroutines (two each). A
	// member holds a handful per peer: two streams, pipelines, probes, snapshots.
	maxProxyConns = 256
)

// peerProxy fronts one member's peer port when ClusterSpec.PeerProxies is set: the member
// advertises the proxy's address, every peer dials it, and it forwards raw TCP (TLS passes
// through untouched) to the member's --listen-peer-urls. Cutting its connections is how
// Member.Isolate partitions a member without root.
type peerProxy struct {
	member *Member
	ln     net.Listener
	target string         // host:port of the member's --listen-peer-urls
	wg     sync.WaitGroup // the accept loop and every connection's goroutines

	mu     sync.Mutex
	conns  map[*proxiedConn]struct{}
	closed bool
}

// proxiedConn is one forwarded connection: from the member that dialed the proxy (in) to the
// proxy's member (out).
type proxiedConn struct {
	in net.Conn

	mu     sync.Mutex
	out    net.Conn // nil until the proxy has connected to its member
	closed bool
}

// startPeerProxy listens on a free port of 127.0.0.1 and forwards to 127.0.0.1:targetPort.
func startPeerProxy(m *Member, targetPort int) (*peerProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("peer proxy for %s: %w", m.Name, err)
	}
	p := &peerProxy{
		member: m,
		ln:     ln,
		target: net.JoinHostPort("127.0.0.1", strconv.Itoa(targetPort)),
		conns:  map[*proxiedConn]struct{}{},
	}
	p.wg.Go(p.acceptLoop)
	return p, nil
}

func (p *peerProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *peerProxy) acceptLoop() {
	for {
		in, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil { // out of descriptors, say: let them free up
			time.Sleep(50 * time.Millisecond)
			continue
		}
		pc := &proxiedConn{in: in}
		if !p.track(pc) {
			in.Close()
			continue
		}
		p.wg.Go(func() { p.serve(pc) })
	}
}

// serve forwards pc both ways until either side closes it or Isolate cuts it. A connection
// across a partition is closed at once: its dialer sees the peer hang up, as after a reset.
func (p *peerProxy) serve(pc *proxiedConn) {
	defer p.untrack(pc)
	defer pc.close()
	if p.member.cluster.crossesPartition(p.member, pc.in) {
		return
	}
	out, err := net.DialTimeout("tcp", p.target, proxyDialTimeout)
	if err != nil {
		return // the member is down; its dialer sees the connection closed
	}
	if !pc.attach(out) {
		return // cut meanwhile
	}
	done := make(chan struct{})
	p.wg.Go(func() {
		defer close(done)
		pipe(pc, out, pc.in)
	})
	pipe(pc, pc.in, out)
	<-done
}

// pipe copies src to dst. At src's end of stream it half-closes dst, so the far side sees the
// same end of stream; on an error it closes the whole connection.
func pipe(pc *proxiedConn, dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		pc.close()
		return
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

func (p *peerProxy) track(pc *proxiedConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.conns) >= maxProxyConns {
		return false
	}
	p.conns[pc] = struct{}{}
	return true
}

func (p *peerProxy) untrack(pc *proxiedConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, pc)
}

// connections returns the proxy's open connections.
func (p *peerProxy) connections() []*proxiedConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*proxiedConn, 0, len(p.conns))
	for pc := range p.conns {
		out = append(out, pc)
	}
	return out
}

// closeAll closes every open connection; the listener stays.
func (p *peerProxy) closeAll() {
	for _, pc := range p.connections() {
		pc.close()
	}
}

// close stops accepting, closes every connection and waits for the proxy's goroutines. It is
// safe to call more than once.
func (p *peerProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.closeAll()
	p.wg.Wait()
}

// attach records the connection to the member; false if pc was closed meanwhile (out is then
// closed too).
func (pc *proxiedConn) attach(out net.Conn) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.closed {
		out.Close()
		return false
	}
	pc.out = out
	return true
}

func (pc *proxiedConn) close() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.closed {
		return
	}
	pc.closed = true
	pc.in.Close()
	if pc.out != nil {
		pc.out.Close()
	}
}

// crossesPartition reports whether a connection that dst's proxy accepted must be cut: dst is
// isolated, or the member that dialed it is. Finding the dialer reads /proc, so it is only
// done while some member is isolated. A dialer that cannot be found (gone already, or not a
// member) is let through.
func (c *Cluster) crossesPartition(dst *Member, in net.Conn) bool {
	if dst.isolated.Load() {
		return true
	}
	if c.isolations.Load() == 0 {
		return false
	}
	for _, m := range c.isolatedMembers() {
		if dialed, err := m.dialed([]net.Conn{in}); err == nil && dialed[in] {
			return true
		}
	}
	return false
}

// isolatedMembers returns the members, removed ones too, that Isolate cut off.
func (c *Cluster) isolatedMembers() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Member
	for _, m := range c.started {
		if m.isolated.Load() {
			out = append(out, m)
		}
	}
	return out
}

// peerProxies returns every proxy the cluster started.
func (c *Cluster) peerProxies() []*peerProxy {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*peerProxy(nil), c.proxies...)
}

// Isolate cuts m off from its peers, both ways, as a network partition around its node would:
// its proxy closes every connection and hangs up on new ones, and the other members' proxies
// do the same to every connection m's process dialed. Both are needed because etcd sends raft
// messages over connections either side dialed: a leader's appends to m travel on the stream
// m opened to the leader. m keeps serving clients on its client port. It needs
// ClusterSpec.PeerProxies; it lasts across restarts of m, until Heal.
func (m *Member) Isolate() error {
	if m.proxy == nil {
		return fmt.Errorf("isolate member %s: the cluster has no peer proxies (set ClusterSpec.PeerProxies)", m.Name)
	}
	c := m.cluster
	if m.isolated.Swap(true) {
		return nil
	}
	c.isolations.Add(1)
	// The flag is set before the connections are listed: a connection accepted after the
	// listing checks the flag itself (crossesPartition).
	m.proxy.closeAll()
	for _, p := range c.peerProxies() {
		if p == m.proxy {
			continue
		}
		conns := p.connections()
		ins := make([]net.Conn, len(conns))
		for i, pc := range conns {
			ins[i] = pc.in
		}
		dialed, err := m.dialed(ins)
		if err != nil {
			return fmt.Errorf("isolate member %s: %w", m.Name, err)
		}
		for _, pc := range conns {
			if dialed[pc.in] {
				pc.close()
			}
		}
	}
	return nil
}

// Heal undoes Isolate: the proxies let m's peer connections through again, and etcd redials
// them within a fraction of a second.
func (m *Member) Heal() {
	if m.isolated.Swap(false) {
		m.cluster.isolations.Add(-1)
	}
}

// IsIsolated reports whether Isolate cut m off and Heal has not undone it.
func (m *Member) IsIsolated() bool { return m.isolated.Load() }

// dialed reports which of conns, accepted by some peer proxy, m's running process dialed.
func (m *Member) dialed(conns []net.Conn) (map[net.Conn]bool, error) {
	out := map[net.Conn]bool{}
	pid := m.pid()
	if pid == 0 || len(conns) == 0 {
		return out, nil
	}
	table, err := socketInodes()
	if err != nil {
		return nil, err
	}
	mine, err := processSockets(pid)
	if err != nil {
		if !m.IsRunning() {
			return out, nil // exited meanwhile: it holds no connection
		}
		return nil, err
	}
	for _, in := range conns {
		// The dialer's socket has the accepted connection's addresses swapped.
		key := portPair{local: in.RemoteAddr().(*net.TCPAddr).Port, remote: in.LocalAddr().(*net.TCPAddr).Port}
		if inode, ok := table[key]; ok && mine[inode] {
			out[in] = true
		}
	}
	return out, nil
}

// pid returns the process ID of the member's running etcd, or 0.
func (m *Member) pid() int {
	p := m.current()
	if p == nil || p.exited() {
		return 0
	}
	return p.cmd.Process.Pid
}
