package etcdtest

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A cluster with mutual TLS on client and peer ports, as kubeadm runs etcd: members bootstrap,
// join and rejoin over it, writes survive a restart, and a client trusting another CA gets an
// error within its 3 s deadline.
func TestTLSClusterJoinsRestartsAndRefusesOtherCA(t *testing.T) {
	t.Parallel()
	certs := NewCerts(t, "")
	c := NewCluster(t, ClusterSpec{Size: 2, Version: Linked, TLS: certs})
	c.AddMember(t, "m3", AddOptions{}) // the join path too: a 3-member cluster
	for _, m := range c.Members() {
		if !strings.HasPrefix(m.ClientURL, "https://") || !strings.HasPrefix(m.PeerURL, "https://") {
			t.Errorf("%s has client URL %s and peer URL %s, want https", m.Name, m.ClientURL, m.PeerURL)
		}
	}

	ctx := t.Context()
	cli := c.Client(t)
	ledger := StartLoad(ctx, t, cli, LoadSpec{Prefix: "tls/", Rate: 50})
	time.Sleep(time.Second)
	victim := c.Member("m2")
	if err := victim.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	if err := victim.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	ledger.Stop()
	acked := ledger.Acked()
	missing, err := MissingWrites(ctx, cli, acked)
	if err != nil {
		t.Fatal(err)
	}
	if len(acked) == 0 || len(missing) > 0 {
		t.Fatalf("%d acknowledged, %d missing", len(acked), len(missing))
	}
	assertCaughtUp(t, victim, acked)

	info := certs.TLSInfo()
	info.TrustedCAFile = certs.OtherCAFile
	wrongCA, err := info.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := dial(c.Endpoints(), wrongCA)
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	started := time.Now()
	_, err = wrong.Get(rctx, "tls/")
	t.Logf("client trusting another CA: after %s: %v", time.Since(started).Round(time.Millisecond), err)
	if err == nil {
		t.Fatal("a client trusting another CA read from the cluster")
	}
	// The client only says "context deadline exceeded"; the member's log says why.
	for _, m := range c.Members() {
		if strings.Contains(m.LogTail(50), "remote error: tls: bad certificate") {
			return
		}
	}
	t.Error(`no member logged the refused handshake ("remote error: tls: bad certificate")`)
}

// etcd 3.5 takes the same TLS flags.
func TestTLSFlagsWorkOnEtcd35(t *testing.T) {
	t.Parallel()
	c := NewCluster(t, ClusterSpec{Version: V3_5_24, TLS: NewCerts(t, "")})
	assertVersions(t, c)
	cli := c.Client(t)
	if _, err := cli.Put(t.Context(), "tls/k", "v"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(t.Context(), "tls/k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get tls/k: %v %v", resp, err)
	}
}
