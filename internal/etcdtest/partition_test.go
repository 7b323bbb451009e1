package etcdtest

import (
	"bufio"
	"context"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A follower cut off from its peers, on a TLS cluster whose third member joined at runtime:
// the others keep committing while it falls behind yet still answers clients, and once healed
// it catches up with every acknowledged write.
func TestPeerProxiesIsolateAndHealFollower(t *testing.T) {
	t.Parallel()
	c := NewCluster(t, ClusterSpec{Size: 2, TLS: NewCerts(t, ""), PeerProxies: true})
	c.AddMember(t, "m3", AddOptions{}) // the join path goes through the proxies too
	list := c.MemberList(t)
	for _, m := range c.Members() {
		if m.PeerURL == m.listenPeerURL || !strings.HasPrefix(m.PeerURL, "https://127.0.0.1:") {
			t.Errorf("%s advertises %s and listens on %s: want an https proxy URL in front", m.Name, m.PeerURL, m.listenPeerURL)
		}
		for _, pm := range list {
			if pm.ID == m.ID && (len(pm.PeerURLs) != 1 || pm.PeerURLs[0] != m.PeerURL) {
				t.Errorf("member list has %s at %v, the harness says %s", m.Name, pm.PeerURLs, m.PeerURL)
			}
		}
	}

	leader := c.Leader(t)
	follower := c.Member("m3")
	if follower == leader {
		follower = c.Member("m2")
	}
	if follower == leader {
		follower = c.Member("m1")
	}
	if err := follower.Isolate(); err != nil {
		t.Fatal(err)
	}
	cli := c.ClientExcept(t, follower)
	ledger := StartLoad(t.Context(), t, cli, LoadSpec{Prefix: "partition/", Rate: 100})
	time.Sleep(3 * time.Second) // past the election timeout: the follower notices it is alone
	ledger.Stop()
	acked := ledger.Acked()
	if len(acked) == 0 {
		t.Fatal("the majority side acknowledged no write")
	}

	// Each Status opens a TLS client of its own: 15 s each, as a handshake of a -race binary on
	// a loaded machine can take seconds.
	fctx, fcancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer fcancel()
	fst, err := follower.Status(fctx)
	if err != nil {
		t.Fatalf("the isolated member must still answer on its client port: %v", err)
	}
	lctx, lcancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer lcancel()
	lst, err := leader.Status(lctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("isolated %s: leader %x, term %d, raft index %d, applied %d, errors %v; leader %s: term %d, raft index %d; %d writes acknowledged",
		follower.Name, fst.Leader, fst.RaftTerm, fst.RaftIndex, fst.RaftAppliedIndex, fst.Errors, leader.Name, lst.RaftTerm, lst.RaftIndex, len(acked))
	if lst.RaftIndex < fst.RaftAppliedIndex+uint64(len(acked)) {
		t.Errorf("isolated %s applied %d, leader at %d after %d writes: the follower kept receiving entries", follower.Name, fst.RaftAppliedIndex, lst.RaftIndex, len(acked))
	}
	last := acked[len(acked)-1]
	// Its own 10 s, like the reads above (seen once on a busy machine when they shared one).
	gctx, gcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer gcancel()
	resp, err := follower.Client(t).Get(gctx, last.Key, clientv3.WithSerializable())
	if err != nil || len(resp.Kvs) != 0 {
		t.Errorf("isolated %s serves %s: %v %v", follower.Name, last.Key, resp, err)
	}

	follower.Heal()
	assertCaughtUp(t, follower, acked)
}

// The proxy forwards both ways and passes a half-close on; cutting its connections and
// closing it leaves no goroutine behind; Isolate needs proxies.
func TestPeerProxyForwardsAndCleansUp(t *testing.T) {
	// Not parallel: it counts the process's goroutines.
	if err := (&Member{Name: "m1"}).Isolate(); err == nil || !strings.Contains(err.Error(), "PeerProxies") {
		t.Errorf("Isolate without proxies: %v", err)
	}
	before := runtime.NumGoroutine()
	echo := echoServer(t)
	m := &Member{Name: "m1", cluster: &Cluster{}}
	p, err := startPeerProxy(m, echo)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(p.port())

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "hello\n")
	conn.(*net.TCPConn).CloseWrite() // the echo server answers, then sees the end of stream
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(conn)
	if string(got) != "hello\n" || err != nil {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	// A connection left open is cut by closeAll: its reader sees the end at once.
	held, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	io.WriteString(held, "ping\n")
	held.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(held)
	if line, err := r.ReadString('\n'); line != "ping\n" {
		t.Fatalf("held connection: %q, %v", line, err)
	}
	p.closeAll()
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("a cut connection still delivers data")
	}

	p.close()
	p.close() // twice is fine
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("a closed proxy still accepts connections")
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+1 { // +1: the echo server's accept loop
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines before, %d after closing the proxy:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// echoServer echoes every line back on 127.0.0.1 and returns its port; it stops when t ends.
func echoServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// The kernel's socket tables as /proc/net/tcp and tcp6 print them.
func TestParseSocketTable(t *testing.T) {
	t.Parallel()
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:E193 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111765 1 00000000b08f2b80 100 0 0 10 0
   1: 0100007F:E898 0100007F:E193 01 00000000:00000000 00:00000000 00000000     0        0 111766 2 000000006ea636b5 20 0 0 10 -1
   2: 0100007F:E899 0100007F:E193 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
   0: 0000000000000000FFFF00000100007F:9C40 0000000000000000FFFF00000100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 20 4 30 10 -1
`
	got := map[portPair]uint64{}
	if err := parseSocketTable(bufio.NewScanner(strings.NewReader(table)), got); err != nil {
		t.Fatal(err)
	}
	want := map[portPair]uint64{{0xE193, 0}: 111765, {0xE898, 0xE193}: 111766, {0x9C40, 0x1F90}: 4242} // TIME_WAIT has no inode
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%v: inode %d, want %d", k, got[k], v)
		}
	}
	if err := parseSocketTable(bufio.NewScanner(strings.NewReader("header\n 0: 0100007F:ZZZZ 0100007F:E193 01 0 0 0 0 0 1\n")), got); err == nil {
		t.Error("a bad port parsed")
	}
}
