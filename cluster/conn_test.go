package cluster

import (
	"testing"
	"time"
)

func TestApplyEnvFollowsEtcdctl(t *testing.T) {
	c := DefaultConn()
	for flag, value := range map[string]string{
		"endpoints": "https://a:2379, https://b:2379", "cacert": "/ca", "cert": "/c", "key": "/k",
		"insecure-skip-tls-verify": "true", "command-timeout": "7s", "dial-timeout": "1s",
	} {
		if err := c.ApplyEnv(flag, value); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.Endpoints) != 2 || c.Endpoints[1] != "https://b:2379" || c.CACert != "/ca" || !c.InsecureSkipVerify || c.CommandTimeout != 7*time.Second || c.DialTimeout != time.Second {
		t.Fatalf("%+v", c)
	}
	if err := c.ApplyEnv("command-timeout", "soon"); err == nil {
		t.Error("a bad duration must be refused")
	}
	if EnvVar("insecure-skip-tls-verify") != "ETCDCTL_INSECURE_SKIP_TLS_VERIFY" {
		t.Error(EnvVar("insecure-skip-tls-verify"))
	}
}

func TestValidateRefusesHalfAClientCert(t *testing.T) {
	c := DefaultConn()
	c.Cert = "/c"
	if err := c.Validate(); err == nil {
		t.Fatal("--cert without --key must be refused")
	}
	c = DefaultConn()
	c.Endpoints = nil
	if err := c.Validate(); err == nil {
		t.Fatal("no endpoints must be refused")
	}
}

func TestEndpointsCompareWithoutScheme(t *testing.T) {
	if NormalizeEndpoint("http://127.0.0.1:2379/") != NormalizeEndpoint("127.0.0.1:2379") {
		t.Fatal("same endpoint")
	}
	if hp, ok := tcpAddress("https://127.0.0.1:2379"); !ok || hp != "127.0.0.1:2379" {
		t.Fatal(hp)
	}
	if _, ok := tcpAddress("unix:///run/etcd.sock"); ok {
		t.Fatal("unix sockets have no TCP address")
	}
}

// A member forced into a cluster of its own (same cluster ID) must not redefine the membership.
func TestMembershipComesFromTheMajority(t *testing.T) {
	mk := func(id string, index uint64, members ...string) *Probe {
		p := &Probe{Endpoint: id, Reached: true, Status: &Status{ClusterID: "c", MemberID: id, Leader: id, RaftIndex: index}}
		for _, m := range members {
			p.Members = append(p.Members, Member{ID: m, Name: m, ClientURLs: []string{m}})
		}
		return p
	}
	v := BuildView([]*Probe{mk("a", 10, "a", "b"), mk("b", 10, "a", "b"), mk("x", 99, "x")}, time.Now())
	if len(v.Members) != 2 || len(v.Strangers) != 1 || v.Strangers[0].Endpoint != "x" {
		t.Fatalf("members %+v strangers %+v", v.Members, v.Strangers)
	}
}
