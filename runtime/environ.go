package runtime

import (
	"os"
	"strings"
)

// baseEnviron are the variables every started etcd keeps from etcdmedic's own environment:
// what a process needs to find programs, its home and temp dir, and its locale and time zone.
var baseEnviron = []string{"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TZ"}

// Environ is the explicit environment of a member etcdmedic starts: baseEnviron from
// etcdmedic's own environment, plus the ETCD_* variables named in pass (given by the operator on
// purpose), each as NAME=value. Nothing else is inherited: not etcdctl's ETCDCTL_* (an
// ETCDCTL_PASSWORD would show in the member's /proc/PID/environ), and no ETCD_* the operator's
// shell happens to hold (it would reconfigure the member behind the flags the plan shows).
func Environ(pass []string) []string {
	var env []string
	for _, name := range baseEnviron {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	for _, name := range pass {
		if !strings.HasPrefix(name, "ETCD_") {
			continue
		}
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}
