// Package etcdtest runs real etcd clusters, of real etcd versions, for etcdmedic's tests.
//
// Every member is its own etcd process on 127.0.0.1 with its own data dir and log file, so a
// test can kill, restart, upgrade and corrupt members exactly as an incident did. A write
// ledger (StartLoad, MissingWrites) records every write the cluster acknowledged, so a test
// can prove that a repair lost nothing. With ClusterSpec.PeerProxies every member's peer
// traffic goes through a proxy in the test process, and Member.Isolate partitions a member
// from its peers (both ways; it keeps serving clients) until Member.Heal, without root.
//
// All waits are bounded and every process is killed in t.Cleanup.
package etcdtest
