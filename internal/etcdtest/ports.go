package etcdtest

import "github.com/etcdmedic/etcdmedic/internal/freeport"

// freePorts returns n distinct ports on 127.0.0.1 that were free a moment ago, outside the
// kernel's ephemeral range (see package freeport). Another listener can still take one before
// etcd binds it; NewCluster retries once with new ports.
func freePorts(n int) ([]int, error) { return freeport.Ports(n) }
