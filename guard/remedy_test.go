package guard

import (
	"strings"
	"testing"
)

// The commands guard prints are what the operator copies at 3 a.m.: each must reach the same
// cluster the same way (TLS files, user, never a password), name the member as it was given
// (its WAL dir apart, or the --from-* form), and never carry an empty value.
func TestRemedyCommandsWorkWhenCopied(t *testing.T) {
	stale := Verdict{Class: Removed, Movable: true, Reason: "member f2 is no longer in the live membership"}
	tls := func(o Options) Options {
		o.Conn.Endpoints = []string{"https://10.0.0.10:2379", "https://10.0.0.11:2379"}
		o.Conn.CACert, o.Conn.Cert, o.Conn.Key = "/etc/kubernetes/pki/etcd/ca.crt", "/etc/kubernetes/pki/etcd/peer.crt", "/etc/kubernetes/pki/etcd/peer.key"
		o.Conn.User, o.Conn.Password = "root", "s3cret"
		return o
	}
	const conn = "--endpoints=https://10.0.0.10:2379,https://10.0.0.11:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/etcd/peer.crt --key=/etc/kubernetes/pki/etcd/peer.key --user=root"
	for _, tc := range []struct {
		name string
		opts func(Options) Options
		// want are phrases the next steps must hold; never, phrases they must not.
		want, never []string
	}{
		{name: "a member whose WAL lives apart, on a TLS cluster with auth",
			opts: func(o Options) Options {
				o = tls(o)
				o.DataDir, o.WALDir = "/var/lib/etcd", "/mnt/wal/etcd"
				return o
			},
			want: []string{
				"etcdmedic guard --data-dir /var/lib/etcd --wal-dir /mnt/wal/etcd --name pd-3 --peer-urls " + newPeer + " " + conn + " --fix",
				"etcdctl " + conn + " member add pd-3 --learner --peer-urls=" + newPeer,
				"(or add --rejoin to the guard command)",
			},
			never: []string{"s3cret"}},
		{name: "a member read from its config file",
			opts: func(o Options) Options {
				o.MemberFlags = []string{"--from-config", "/etc/etcd/etcd.conf.yml"}
				return o
			},
			want: []string{"etcdmedic guard --from-config /etc/etcd/etcd.conf.yml --endpoints="}},
		{name: "no peer URLs given: no empty --peer-urls=",
			opts: func(o Options) Options {
				o.Expect = Expect{Name: "pd-3"}
				return o
			},
			want:  []string{"give guard the member's --name and --peer-urls"},
			never: []string{"--peer-urls=", "--peer-urls ''", "--rejoin"}},
		{name: "a user given as NAME:PASSWORD",
			opts: func(o Options) Options {
				o.Conn.User = "root:s3cret"
				return o
			},
			want: []string{"--user=root --fix"}, never: []string{"s3cret"}},
		{name: "a data dir with a space", opts: func(o Options) Options { o.DataDir = "/var/lib/etcd data"; return o },
			want: []string{"etcdmedic guard --data-dir '/var/lib/etcd data' --name pd-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts(options(t, "/var/lib/etcd"))
			res := &Result{Verdict: stale}
			if goOn, err := opts.act(res, nil, healthyPD()); goOn || err != nil {
				t.Fatalf("act: %v, %v", goOn, err)
			}
			next := strings.Join(res.Next, "\n")
			for _, w := range tc.want {
				if !strings.Contains(next, w) {
					t.Errorf("next steps do not hold %q:\n%s", w, next)
				}
			}
			for _, n := range tc.never {
				if strings.Contains(next, n) {
					t.Errorf("next steps hold %q:\n%s", n, next)
				}
			}
		})
	}
}
