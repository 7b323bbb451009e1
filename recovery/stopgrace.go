package recovery

import (
	"time"

	"github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// QuorumLostStopGrace is how long a member of a cluster that lost quorum gets between SIGTERM
// and SIGKILL when etcdmedic stops its process. Without quorum it commits and applies nothing;
// etcd's graceful stop then only waits, up to its request timeout (7 s by default), for client
// streams such as the watches every kube-apiserver holds to end, while the cluster stays down.
// Its WAL is synced for everything it acknowledged and its db is crash-safe, so the kill loses
// nothing (the power-cut tests cut far harder). The grace is outage: plan's 2 s watch for a
// supervisor starting the member again, and then the rebuilt survivor, wait for the stop.
const QuorumLostStopGrace = 50 * time.Millisecond

// stoppingQuorumLost returns rt with QuorumLostStopGrace when it stops local processes and no
// grace was set.
func stoppingQuorumLost(rt runtime.Runtime) runtime.Runtime {
	if l, ok := rt.(local.Runtime); ok && l.Grace == 0 {
		l.Grace = QuorumLostStopGrace
		return l
	}
	return rt
}

// FirstRunStopGrace is how long restart-clean gives the survivor's first run alone between
// SIGTERM and SIGKILL. From SIGTERM on, etcd takes no new request, and then waits for client
// streams (watches) to end, up to its request timeout: time the cluster takes no writes. A
// one-member cluster of etcd v3.5.5 or later (v3.4.21 in 3.4) acknowledges a write only once
// its WAL holds it on disk, so the kill loses nothing acknowledged. Older versions could
// acknowledge one before (etcd #14370): they get etcd's whole graceful stop.
const FirstRunStopGrace = 250 * time.Millisecond
