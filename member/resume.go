package member

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// A replace or add interrupted after it started the new member (killed while the learner
// caught up, or out of catch-up time) leaves a learner running on the new data dir. Its data
// dir is then the new member's own, not old data: a rerun goes on from it instead of guarding
// it (the guard refuses a live member's data, and an operator who emptied it would have a
// second etcd start with the learner's ID).

// startedOn reports whether the data dir whose identity is dir (read offline; nil when it
// holds none) is member m's own, started there by an earlier run of this same join: m has
// exactly spec's peer URLs and spec's name (or none yet: killed before it published it), and
// the data dir is of m's cluster and of m's ID. Learner or voter: a run killed after the
// promotion goes on from it too.
func startedOn(m etcdmedic.Member, clusterID etcdmedic.ClusterID, spec JoinSpec, dir *datadir.Identity) bool {
	return dir != nil && dir.MemberID != etcdmedic.NoID && dir.MemberID == m.ID && dir.ClusterID == clusterID &&
		sameURLs(m.PeerURLs, spec.PeerURLs) && (m.Name == "" || m.Name == spec.Name)
}

// dataDirIdentity reads offline which member of which cluster the data dir holds: nil when it
// holds no etcd member (missing, empty). A running etcd locks its WAL and db; its identity is
// then read from a copy of its WAL and .snap files (etcd only appends to them), as inspect
// --live-endpoint does, without its db. The data dir is only read.
func dataDirIdentity(dataDir, walDir string) (*datadir.Identity, error) {
	if dataDir == "" {
		return nil, nil
	}
	if _, err := os.Stat(dataDir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	rep, err := datadir.Inspect(dataDir, datadir.Options{WALDir: walDir})
	if errors.Is(err, datadir.ErrLocked) {
		rep, err = inspectLogsCopy(dataDir, walDir)
	}
	if err != nil {
		return nil, fmt.Errorf("read whose data %s holds: %w", dataDir, err)
	}
	return rep.Identity, nil
}

// inspectLogsCopy inspects a copy of a running member's WAL and .snap files, in a temporary
// folder removed afterwards.
func inspectLogsCopy(dataDir, walDir string) (*datadir.Report, error) {
	tmp, err := os.MkdirTemp("", "etcdmedic-identity-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if _, err := datadir.CopyLogsForInspection(dataDir, walDir, tmp); err != nil {
		return nil, err
	}
	return datadir.Inspect(tmp, datadir.Options{})
}

// startedEarlier is the member an earlier run of this join added and started on spec's data
// dir (see startedOn), or nil: none, or the data dir holds anything else (then it is guarded
// as always).
func startedEarlier(v *cluster.View, spec JoinSpec) *cluster.MemberView {
	m := addedEarlier(v, spec.PeerURLs)
	if m == nil || spec.DataDir == "" {
		return nil
	}
	id, err := dataDirIdentity(spec.DataDir, spec.WALDir)
	if err != nil || !startedOn(m.Member, v.ClusterID, spec, id) {
		return nil
	}
	return m
}

// runsOn reports whether an etcd runs on the data dir: a process holds its WAL or db, or an
// etcd process names it. Starting another one there would only fail, or worse.
func runsOn(spec JoinSpec) bool {
	if datadir.RunningOn(spec.DataDir) || (spec.WALDir != "" && datadir.WALDirLocked(spec.WALDir)) {
		return true
	}
	_, _, ok := local.FindProcess(spec.DataDir)
	return ok
}
