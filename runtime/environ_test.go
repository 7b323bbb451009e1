package runtime

import (
	"os"
	"strings"
	"testing"
)

// With none of the base variables set (a unit with a bare environment, env -i), a member still
// gets an empty environment, not nil: os/exec and os.StartProcess read nil as "inherit all".
func TestEnvironIsNeverNil(t *testing.T) {
	for _, name := range baseEnviron {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	t.Setenv("ETCDCTL_PASSWORD", "s3cret")
	t.Setenv("ETCD_NAME", "m9")
	if env := Environ(nil); env == nil || len(env) != 0 {
		t.Errorf("Environ(nil) = %#v, want an empty, non-nil environment", env)
	}
	if env := EnvironOf(nil); env == nil || len(env) != 0 {
		t.Errorf("EnvironOf(nil) = %#v, want an empty, non-nil environment", env)
	}
	if env := Environ([]string{"ETCD_NAME", "ETCDCTL_PASSWORD"}); len(env) != 1 || env[0] != "ETCD_NAME=m9" {
		t.Errorf("Environ(ETCD_NAME, ETCDCTL_PASSWORD) = %q", env)
	}
}

// --pass-env refuses what would make a started member not run as the plan shows, or not run.
func TestPassedRefusesWhatEtcdmedicSetsItself(t *testing.T) {
	t.Setenv("ETCD_QUOTA_BACKEND_BYTES", "4294967296")
	t.Setenv("ETCD_CONFIG_FILE", "/etc/etcd/etcd.conf.yml")
	t.Setenv("ETCD_DATA_DIR", "/var/lib/etcd")
	t.Setenv("ETCD_FORCE_NEW_CLUSTER", "true")
	t.Setenv("ETCD_INITIAL_CLUSTER_STATE", "existing")
	t.Setenv("ETCD_HEARTBEAT_INTERVAL", "250")
	for _, tc := range []struct {
		situation string
		name      string
		want      string // in the error; "" : passed
	}{
		{"a setting etcdmedic leaves alone", "ETCD_QUOTA_BACKEND_BYTES", ""},
		{"a tuned cluster's timing: a recovery then starts its survivor once, with it (no short first run)", "ETCD_HEARTBEAT_INTERVAL", ""},
		{"a config file: etcd would ignore every flag etcdmedic gives", "ETCD_CONFIG_FILE", "ignores every flag"},
		{"the data dir etcdmedic starts the member on", "ETCD_DATA_DIR", "sets --data-dir itself"},
		{"a forced start", "ETCD_FORCE_NEW_CLUSTER", "sets --force-new-cluster itself"},
		{"the cluster state of a rejoin", "ETCD_INITIAL_CLUSTER_STATE", "refuses to start with a flag and its variable"},
	} {
		t.Run(tc.situation, func(t *testing.T) {
			got, err := Passed([]string{tc.name})
			switch {
			case tc.want == "" && (err != nil || len(got) != 1):
				t.Errorf("Passed(%s) = %q, %v", tc.name, got, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Passed(%s) = %q, %v: want an error with %q", tc.name, got, err, tc.want)
			}
		})
	}
}

// A variable given beside a flag (an --etcd-flag, a plan's flags) stops the start before etcd
// dies of it.
func TestConflictsNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		situation string
		passed    []string
		argv      []string
		want      string
	}{
		{"no overlap", []string{"ETCD_QUOTA_BACKEND_BYTES=1"}, []string{"etcd", "--name", "m1", "--cert-file=/c"}, ""},
		{"an --etcd-flag and its variable", []string{"ETCD_CERT_FILE=/a"}, []string{"etcd", "--name", "m1", "--cert-file=/c"}, "ETCD_CERT_FILE is passed to the member (--pass-env) and it is started with --cert-file"},
		{"a single-dash flag", []string{"ETCD_AUTO_TLS=true"}, []string{"-auto-tls"}, "--auto-tls"},
	} {
		t.Run(tc.situation, func(t *testing.T) {
			err := Conflicts(tc.passed, tc.argv)
			if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Conflicts = %v, want %q", err, tc.want)
			}
		})
	}
}
