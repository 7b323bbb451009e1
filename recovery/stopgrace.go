package recovery

import (
	"time"

	"github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/local"
	"github.com/etcdmedic/etcdmedic/runtime/systemd"
)

// QuorumLostStopGrace is how long a member of a cluster that lost quorum gets between SIGTERM
// and SIGKILL when etcdmedic stops its process. Without quorum it commits and applies nothing;
// etcd's graceful stop then only waits, up to its request timeout (7 s by default), for client
// streams such as the watches every kube-apiserver holds to end, while the cluster stays down.
// Its WAL is synced for everything it acknowledged and its db is crash-safe, so the kill loses
// nothing (the power-cut tests cut far harder).
const QuorumLostStopGrace = 250 * time.Millisecond

// FirstRunStopGrace is how long restart-clean gives the survivor's first run alone between
// SIGTERM and SIGKILL. From SIGTERM on, etcd takes no new request, and then waits for client
// streams (watches) to end, up to its request timeout: time the cluster takes no writes. A
// one-member cluster acknowledges a write only once its WAL holds it on disk, so the kill
// loses nothing acknowledged.
const FirstRunStopGrace = 250 * time.Millisecond

// stoppingQuorumLost returns rt with QuorumLostStopGrace when it stops local processes and no
// grace was set.
func stoppingQuorumLost(rt runtime.Runtime) runtime.Runtime {
	return withStopGrace(rt, QuorumLostStopGrace)
}

// withStopGrace returns rt with grace between SIGTERM and SIGKILL when it stops local
// processes (itself, or after systemctl stop) and no grace was set.
func withStopGrace(rt runtime.Runtime, grace time.Duration) runtime.Runtime {
	switch r := rt.(type) {
	case local.Runtime:
		if r.Grace == 0 {
			r.Grace = grace
		}
		return r
	case systemd.Runtime:
		r.Then = withStopGrace(r.Then, grace)
		return r
	}
	return rt
}
