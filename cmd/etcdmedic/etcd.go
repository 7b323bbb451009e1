package main

import (
	"go.etcd.io/etcd/server/v3/etcdmain"
)

// linkedEtcdCommand runs the etcd server linked into etcdmedic, so that a sandbox needs no
// download: `etcdmedic etcd --name m1 ...` takes exactly etcd's own flags.
const linkedEtcdCommand = "etcd"

func runLinkedEtcd(args []string) {
	etcdmain.Main(append([]string{"etcd"}, args...))
}
