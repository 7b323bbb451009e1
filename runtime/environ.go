package runtime

import (
	"fmt"
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
	// Never nil: os/exec and os.StartProcess give a nil environment all of etcdmedic's.
	env := []string{}
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

// Passed reads the ETCD_* variables the operator passes on purpose (--pass-env NAME) as
// NAME=value. Plans record them so: an apply resumed later, from another shell, starts every
// member with the environment the plan showed.
func Passed(names []string) ([]string, error) {
	var out []string
	for _, name := range names {
		if !strings.HasPrefix(name, "ETCD_") || strings.Contains(name, "=") {
			return nil, fmt.Errorf("--pass-env %q: only etcd's own ETCD_* variables go to a member, by name", name)
		}
		v, ok := os.LookupEnv(name)
		if !ok {
			return nil, fmt.Errorf("--pass-env %s: the variable is not set", name)
		}
		out = append(out, name+"="+v)
	}
	return out, nil
}

// EnvironOf is the environment of a member started with passed (NAME=value, from Passed or a
// plan): Environ's base variables, then the passed ETCD_* ones. Anything else is dropped.
func EnvironOf(passed []string) []string {
	env := Environ(nil)
	for _, kv := range passed {
		if name, _, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(name, "ETCD_") {
			env = append(env, kv)
		}
	}
	return env
}
