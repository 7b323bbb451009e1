// Package etcdmedic holds the words every other package speaks: a member ID, a member and
// its peer and client URLs, a cluster ID. The data dir (offline) and the cluster view (live)
// both describe members with these types, so a finding, a plan or a guard compares what disk
// and cluster say without converting between them.
package etcdmedic
