package runtime

import (
	"os"
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
