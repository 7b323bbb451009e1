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

// ManagedFlags are the etcd flags etcdmedic sets itself on the members it starts
// (MemberSpec.Flags, a forced start, a restore). etcd refuses to start when a flag and its
// ETCD_* variable are both set (pkg/flags verifyEnv), so none of these is passed as a variable.
// A tuned cluster's timing (ETCD_HEARTBEAT_INTERVAL, ETCD_ELECTION_TIMEOUT,
// ETCD_SNAPSHOT_COUNT) may be: only a recovery's short first run of the survivor sets those
// flags (and none that is passed: the survivor then starts once, with its own), and the
// runbook survivor's forced run, which the operator runs; a start whose flags meet a passed
// variable is refused by the local runtime itself.
var ManagedFlags = []string{"name", "data-dir", "wal-dir", "listen-client-urls", "advertise-client-urls", "listen-peer-urls",
	"initial-advertise-peer-urls", "initial-cluster", "initial-cluster-state", "initial-cluster-token", "force-new-cluster"}

// EnvVar names an etcd flag's variable, as etcd's flags.FlagToEnv does.
func EnvVar(flag string) string {
	return "ETCD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Passed reads the ETCD_* variables the operator passes on purpose (--pass-env NAME) as
// NAME=value. Plans record them so: an apply resumed later, from another shell, starts every
// member with the environment the plan showed. ETCD_CONFIG_FILE and the variables of
// ManagedFlags are refused: the member would not run as the plan shows, or not at all.
func Passed(names []string) ([]string, error) {
	var out []string
	for _, name := range names {
		if !strings.HasPrefix(name, "ETCD_") || strings.Contains(name, "=") {
			return nil, fmt.Errorf("--pass-env %q: only etcd's own ETCD_* variables go to a member, by name", name)
		}
		if name == EnvVar("config-file") {
			return nil, fmt.Errorf("--pass-env %s: with a config file etcd ignores every flag and variable, so the member would not get the --data-dir, --initial-cluster or --force-new-cluster etcdmedic starts it with; pass the settings you need one by one", name)
		}
		for _, flag := range ManagedFlags {
			if name == EnvVar(flag) {
				return nil, fmt.Errorf("--pass-env %s: etcdmedic sets --%s itself on the members it starts, and etcd refuses to start with a flag and its variable both set", name, flag)
			}
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

// Conflicts reports a passed variable (NAME=value) whose flag is among argv, the flags a
// member is started with: etcd would refuse to start ("conflicting environment variable is
// shadowed by corresponding command-line flag"), so the member is not started at all.
func Conflicts(passed, argv []string) error {
	set := map[string]string{}
	for _, a := range argv {
		if name, ok := strings.CutPrefix(a, "-"); ok {
			name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
			set[EnvVar(name)] = name
		}
	}
	for _, kv := range passed {
		name, _, _ := strings.Cut(kv, "=")
		if flag, ok := set[name]; ok {
			return fmt.Errorf("%s is passed to the member (--pass-env) and it is started with --%s: etcd refuses to start with a flag and its variable both set; drop one of them", name, flag)
		}
	}
	return nil
}
