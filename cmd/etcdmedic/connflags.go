package main

import (
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/etcdmedic/etcdmedic/cluster"
)

// connFlags are etcdctl's connection flags, shared by every command that talks to a cluster.
type connFlags struct {
	conn    cluster.Conn
	kubeadm string
}

var connFlagNames = []string{"endpoints", "cacert", "cert", "key", "insecure-skip-tls-verify", "user", "password", "dial-timeout", "command-timeout"}

func (c *connFlags) register(f *pflag.FlagSet) {
	c.conn = cluster.DefaultConn()
	f.StringSliceVar(&c.conn.Endpoints, "endpoints", c.conn.Endpoints, "gRPC endpoints")
	f.StringVar(&c.conn.CACert, "cacert", "", "verify certificates of TLS-enabled secure servers using this CA bundle")
	f.StringVar(&c.conn.Cert, "cert", "", "identify secure client using this TLS certificate file")
	f.StringVar(&c.conn.Key, "key", "", "identify secure client using this TLS key file")
	f.BoolVar(&c.conn.InsecureSkipVerify, "insecure-skip-tls-verify", false, "skip server certificate verification")
	f.StringVar(&c.conn.User, "user", "", "username for authentication")
	f.StringVar(&c.conn.Password, "password", "", "password for authentication")
	f.DurationVar(&c.conn.DialTimeout, "dial-timeout", c.conn.DialTimeout, "dial timeout for each connection")
	f.DurationVar(&c.conn.CommandTimeout, "command-timeout", c.conn.CommandTimeout, "time allowed for probing the cluster (every member in parallel within it)")
	f.StringVar(&c.kubeadm, "discover-kubeadm", "", "read endpoints and certificates from a kubeadm etcd manifest (default "+cluster.DefaultKubeadmManifest+")")
	f.Lookup("discover-kubeadm").NoOptDefVal = cluster.DefaultKubeadmManifest
}

// resolve applies, in order of precedence: flags, the kubeadm manifest, ETCDCTL_* variables.
func (c *connFlags) resolve(f *pflag.FlagSet) error {
	fromManifest := map[string]bool{}
	if c.kubeadm != "" {
		k, err := cluster.ConnFromKubeadm(c.kubeadm, c.conn)
		if err != nil {
			return failf("give the manifest path: --discover-kubeadm=/path/to/etcd.yaml, or use --endpoints and --cacert/--cert/--key", "%v", err)
		}
		set := map[string]func(){
			"endpoints": func() { c.conn.Endpoints = k.Endpoints },
			"cacert":    func() { c.conn.CACert = k.CACert },
			"cert":      func() { c.conn.Cert = k.Cert },
			"key":       func() { c.conn.Key = k.Key },
		}
		for name, apply := range set {
			if !f.Changed(name) {
				apply()
				fromManifest[name] = true
			}
		}
	}
	for _, name := range connFlagNames {
		if f.Changed(name) || fromManifest[name] {
			continue
		}
		if v, ok := os.LookupEnv(cluster.EnvVar(name)); ok {
			if err := c.conn.ApplyEnv(name, v); err != nil {
				return failf("", "%v", err)
			}
		}
	}
	if err := c.conn.Validate(); err != nil {
		return failf("see --help", "%v", err)
	}
	return nil
}

func (c *connFlags) endpointList() string { return strings.Join(c.conn.Endpoints, ",") }
