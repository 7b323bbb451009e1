package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

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
	f.StringVar(&c.conn.User, "user", "", "username[:password] for authentication (a bare username: the password is asked for on the terminal)")
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
		// An empty variable is unset, as etcdctl's SetPflagsFromEnv reads it: ETCDCTL_ENDPOINTS=
		// keeps the default endpoint, ETCDCTL_DIAL_TIMEOUT= the default timeout.
		if v := os.Getenv(cluster.EnvVar(name)); v != "" {
			if err := c.conn.ApplyEnv(name, v); err != nil {
				return failf("", "%v", err)
			}
		}
	}
	if f.Changed("password") && c.conn.User == "" {
		return failf("give --user NAME with it (or set ETCDCTL_USER)", "--password goes with --user")
	}
	if err := c.conn.ResolveUser(askPassword); err != nil {
		if errors.Is(err, cluster.ErrNoPassword) {
			return failf("give --user NAME:PASSWORD, or --user NAME with --password or ETCDCTL_PASSWORD", "%v", err)
		}
		return failf("", "%v", err)
	}
	if err := c.conn.Validate(); err != nil {
		return failf("see --help", "%v", err)
	}
	return nil
}

// askPassword asks for --user's password on the terminal without echo, as etcdctl does. With
// no terminal (a script, a pipe, CI) it fails at once rather than read a password from a pipe.
func askPassword(user string) (string, error) {
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return "", errors.New("standard input is not a terminal to ask for it")
	}
	fmt.Fprintf(os.Stderr, "Password for %s: ", user)
	b, err := term.ReadPassword(fd)
	fmt.Fprintln(os.Stderr)
	if err != nil {
		return "", fmt.Errorf("read the password: %w", err)
	}
	return string(b), nil
}

// warnTLSUnverified prints one warning line on stderr when cmd will not verify the cluster's
// certificates (--insecure-skip-tls-verify, or its ETCDCTL_ variable as resolve reads it):
// etcd holds every Kubernetes Secret, and anyone in between can then read and change them.
// Called once per command, before it runs.
func warnTLSUnverified(cmd *cobra.Command) {
	const name = "insecure-skip-tls-verify"
	f := cmd.Flags().Lookup(name)
	if f == nil {
		return
	}
	source := "--" + name
	off, _ := strconv.ParseBool(f.Value.String())
	if !f.Changed {
		source = cluster.EnvVar(name)
		var c cluster.Conn
		v := os.Getenv(source)
		off = v != "" && c.ApplyEnv(name, v) == nil && c.InsecureSkipVerify
	}
	if off {
		warnTLSOff(cmd.ErrOrStderr(), source)
	}
}

func warnTLSOff(w io.Writer, source string) {
	fmt.Fprintf(w, "Warning: TLS verification is off (%s): the cluster's certificate is not checked, so anyone on the path can read and change what etcdmedic sends and receives, credentials and Secrets included\n", source)
}

func (c *connFlags) endpointList() string { return strings.Join(c.conn.Endpoints, ",") }
