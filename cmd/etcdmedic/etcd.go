package main

import (
	"go.etcd.io/etcd/server/v3/etcdmain"

	"github.com/etcdmedic/etcdmedic/runtime"
)

// linkedEtcdCommand runs the etcd server linked into etcdmedic, so that a sandbox needs no
// download: `etcdmedic etcd --name m1 ...` takes exactly etcd's own flags.
const linkedEtcdCommand = "etcd"

func runLinkedEtcd(args []string) {
	etcdmain.Main(append([]string{"etcd"}, args...))
}

// passEnvUsage is --pass-env's help, the same on every command that starts members.
const passEnvUsage = "an ETCD_* variable of this shell to give the members it starts, by name (repeatable); they get no other ETCD_* and no ETCDCTL_*"

// passedEnv reads the --pass-env variables as NAME=value.
func passedEnv(names []string) ([]string, error) {
	env, err := runtime.Passed(names)
	if err != nil {
		return nil, failf("export it first, e.g. export ETCD_QUOTA_BACKEND_BYTES=8589934592, then --pass-env ETCD_QUOTA_BACKEND_BYTES", "%v", err)
	}
	return env, nil
}
