package recovery

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic/cluster"
)

// Connection is how a plan reaches the members: TLS files, user, timeouts. Never a password:
// apply takes it again from its flags or ETCDCTL_PASSWORD.
type Connection struct {
	CACert             string        `json:"cacert,omitempty"`
	Cert               string        `json:"cert,omitempty"`
	Key                string        `json:"key,omitempty"`
	InsecureSkipVerify bool          `json:"insecureSkipTLSVerify,omitempty"`
	User               string        `json:"user,omitempty"`
	DialTimeout        time.Duration `json:"dialTimeoutNs,omitempty"`
	CommandTimeout     time.Duration `json:"commandTimeoutNs,omitempty"`
}

// connectionOf keeps what may be written down of c.
func connectionOf(c cluster.Conn) Connection {
	user, _, _ := strings.Cut(c.User, ":") // etcdctl's --user NAME:PASSWORD
	return Connection{CACert: absolute(c.CACert), Cert: absolute(c.Cert), Key: absolute(c.Key), InsecureSkipVerify: c.InsecureSkipVerify, User: user,
		DialTimeout: c.DialTimeout, CommandTimeout: c.CommandTimeout}
}

// absolute: apply may run from another folder than plan.
func absolute(path string) string {
	if path == "" {
		return ""
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// with fills the settings the operator did not give to apply from the plan's.
func (p Connection) with(given cluster.Conn) cluster.Conn {
	c := given
	set := func(dst *string, v string) {
		if *dst == "" {
			*dst = v
		}
	}
	set(&c.CACert, p.CACert)
	set(&c.Cert, p.Cert)
	set(&c.Key, p.Key)
	set(&c.User, p.User)
	c.InsecureSkipVerify = c.InsecureSkipVerify || p.InsecureSkipVerify
	if c.DialTimeout == 0 {
		c.DialTimeout = p.DialTimeout
	}
	if c.CommandTimeout == 0 {
		c.CommandTimeout = p.CommandTimeout
	}
	return c
}
