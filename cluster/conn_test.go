package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic"
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
	if etcdmedic.Normalize("http://127.0.0.1:2379/") != etcdmedic.Normalize("127.0.0.1:2379") {
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
		p := &Probe{Endpoint: id, Reached: true, Status: &Status{ClusterID: 0xc, MemberID: etcdmedic.MustParseID(id), Leader: etcdmedic.MustParseID(id), RaftIndex: index}}
		for _, m := range members {
			p.Members = append(p.Members, etcdmedic.Member{ID: etcdmedic.MustParseID(m), Name: m, ClientURLs: []string{m}})
		}
		return p
	}
	v := BuildView([]*Probe{mk("a", 10, "a", "b"), mk("b", 10, "a", "b"), mk("f", 99, "f")}, time.Now())
	if len(v.Members) != 2 || len(v.Strangers) != 1 || v.Strangers[0].Endpoint != "f" {
		t.Fatalf("members %+v strangers %+v", v.Members, v.Strangers)
	}
}

// --user as etcdctl reads it: each row an operator's habit.
func TestResolveUserFollowsEtcdctl(t *testing.T) {
	noTerminal := func(string) (string, error) { return "", errors.New("not a terminal") }
	typed := func(string) (string, error) { return "typed", nil }
	for _, tc := range []struct {
		name                 string
		user, password       string
		ask                  func(string) (string, error)
		wantUser, wantPass   string
		wantErr, wantNoPassw bool
	}{
		{name: "no auth", ask: noTerminal},
		{name: "NAME:PASSWORD", user: "root:pw", ask: noTerminal, wantUser: "root", wantPass: "pw"},
		{name: "a colon in the password", user: "root:p:w", ask: noTerminal, wantUser: "root", wantPass: "p:w"},
		{name: "--password: --user is the whole name", user: "ro:ot", password: "pw", ask: noTerminal, wantUser: "ro:ot", wantPass: "pw"},
		{name: "bare NAME on a terminal", user: "root", ask: typed, wantUser: "root", wantPass: "typed"},
		{name: "bare NAME, no terminal", user: "root", ask: noTerminal, wantErr: true, wantNoPassw: true},
		{name: "no name before the colon", user: ":pw", ask: noTerminal, wantErr: true},
		{name: "a password alone: no authentication", password: "pw", ask: noTerminal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Conn{User: tc.user, Password: tc.password}
			err := c.ResolveUser(tc.ask)
			if (err != nil) != tc.wantErr || errors.Is(err, ErrNoPassword) != tc.wantNoPassw {
				t.Fatalf("err %v", err)
			}
			if err == nil && (c.User != tc.wantUser || c.Password != tc.wantPass) {
				t.Fatalf("user %q password %q, want %q %q", c.User, c.Password, tc.wantUser, tc.wantPass)
			}
		})
	}
}

// A probe that times out says why gRPC could not connect, when gRPC knows (review item 9).
func TestDescribeErrKeepsTheLastConnectionError(t *testing.T) {
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"plain timeout", context.DeadlineExceeded, "no answer within the command timeout"},
		{"gRPC's last connection error", errors.New(`rpc error: code = DeadlineExceeded desc = latest balancer error: connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`),
			`no answer within the command timeout (last connection error: connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority")`},
		{"refused", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := describeErr(expired, tc.err); got != tc.want {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}
