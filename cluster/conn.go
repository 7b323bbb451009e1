// Package cluster is etcdmedic's live view of a running etcd cluster: how to reach it (with
// etcdctl's conventions), what every member says when probed, and the one view built from it.
package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Conn says how to reach a cluster, with etcdctl's flags and ETCDCTL_* variables.
type Conn struct {
	Endpoints          []string
	CACert             string
	Cert               string
	Key                string
	InsecureSkipVerify bool
	User               string
	Password           string
	DialTimeout        time.Duration
	CommandTimeout     time.Duration
}

// DefaultConn is etcdctl's defaults.
func DefaultConn() Conn {
	return Conn{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 2 * time.Second, CommandTimeout: 5 * time.Second}
}

// EnvVar names the ETCDCTL_* variable for a flag, as etcdctl does (ETCDCTL_ + upper, - to _).
func EnvVar(flag string) string {
	return "ETCDCTL_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// ApplyEnv sets a field from its ETCDCTL_* variable, for a flag the user did not set.
func (c *Conn) ApplyEnv(flag, value string) error {
	switch flag {
	case "endpoints":
		c.Endpoints = splitList(value)
	case "cacert":
		c.CACert = value
	case "cert":
		c.Cert = value
	case "key":
		c.Key = value
	case "insecure-skip-tls-verify":
		b, err := strconv.ParseBool(value)
		if err != nil {
			return fmt.Errorf("%s=%q: want true or false", EnvVar(flag), value)
		}
		c.InsecureSkipVerify = b
	case "user":
		c.User = value
	case "password":
		c.Password = value
	case "dial-timeout", "command-timeout":
		d, err := time.ParseDuration(value)
		if err != nil {
			return fmt.Errorf("%s=%q: want a duration such as 5s", EnvVar(flag), value)
		}
		if flag == "dial-timeout" {
			c.DialTimeout = d
		} else {
			c.CommandTimeout = d
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ErrNoPassword means --user NAME came without a password, and none could be asked for.
var ErrNoPassword = errors.New("no password for --user")

// ResolveUser reads --user as etcdctl does. Without --password (or ETCDCTL_PASSWORD),
// "NAME:PASSWORD" is split at the first colon, and a bare "NAME" gets its password from ask
// (a no-echo prompt on a terminal); with a password given, --user is the whole name. No user,
// no authentication: a password alone (an exported ETCDCTL_PASSWORD) is dropped.
func (c *Conn) ResolveUser(ask func(user string) (string, error)) error {
	switch {
	case c.User == "":
		c.Password = ""
		return nil
	case c.Password != "":
		return nil
	}
	if name, password, ok := strings.Cut(c.User, ":"); ok {
		if name == "" {
			return fmt.Errorf("--user: no user name before the colon (want NAME:PASSWORD)")
		}
		c.User, c.Password = name, password
		return nil
	}
	password, err := ask(c.User)
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrNoPassword, c.User, err)
	}
	c.Password = password
	return nil
}

// Validate checks what can be checked before dialing anything.
func (c Conn) Validate() error {
	if len(c.Endpoints) == 0 {
		return fmt.Errorf("no endpoints: give --endpoints or set ETCDCTL_ENDPOINTS")
	}
	if c.CommandTimeout <= 0 || c.DialTimeout <= 0 {
		return fmt.Errorf("--dial-timeout and --command-timeout must be positive")
	}
	if (c.Cert == "") != (c.Key == "") {
		return fmt.Errorf("--cert and --key go together")
	}
	if _, err := c.tlsConfig(); err != nil {
		return err
	}
	return nil
}

func (c Conn) usesTLS() bool {
	return c.CACert != "" || c.Cert != "" || c.InsecureSkipVerify
}

func (c Conn) tlsConfig() (*tls.Config, error) {
	if !c.usesTLS() {
		return nil, nil
	}
	info := transport.TLSInfo{TrustedCAFile: c.CACert, CertFile: c.Cert, KeyFile: c.Key, InsecureSkipVerify: c.InsecureSkipVerify}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("TLS setup (--cacert %q, --cert %q, --key %q): %w", c.CACert, c.Cert, c.Key, err)
	}
	return cfg, nil
}

// clientFor returns a client that talks to one endpoint only: each member is probed on its
// own, so that one dead member costs nothing to the others.
func (c Conn) clientFor(ctx context.Context, endpoint string) (*clientv3.Client, error) {
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: c.DialTimeout,
		TLS:         tlsCfg,
		Username:    c.User,
		Password:    c.Password,
		Logger:      zap.NewNop(),
		Context:     ctx, // authentication (--user) is bounded by the probe's deadline too
		// Fail fast instead of gRPC's reconnect backoff: a probe has one command timeout.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, MaxDelay: time.Second}, MinConnectTimeout: c.DialTimeout})},
	})
}

// Client returns a client over every endpoint, for commands that change the cluster.
func (c Conn) Client() (*clientv3.Client, error) {
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	return clientv3.New(clientv3.Config{Endpoints: c.Endpoints, DialTimeout: c.DialTimeout, TLS: tlsCfg, Username: c.User, Password: c.Password, Logger: zap.NewNop()})
}

// ClientFor returns a client of one endpoint only.
func (c Conn) ClientFor(endpoint string) (*clientv3.Client, error) {
	return c.clientFor(context.Background(), endpoint)
}

// To returns c aimed at endpoints, with etcdctl's default timeouts where c has none.
func (c Conn) To(endpoints []string) Conn {
	c.Endpoints = endpoints
	if c.DialTimeout == 0 {
		c.DialTimeout = 2 * time.Second
	}
	if c.CommandTimeout == 0 {
		c.CommandTimeout = 3 * time.Second
	}
	return c
}
