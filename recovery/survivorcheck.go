package recovery

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.uber.org/zap"

	"github.com/etcdmedic/etcdmedic"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/plan"
)

// survivorAsPlanned is the survivor's part of checkReality, for a run that resumes a plan (the
// journal is not empty): a data dir swapped or remounted between two runs must be refused
// there too, before anything else is done with it.
//
//   - Its cluster ID must be the plan's on every run: --force-new-cluster keeps the cluster ID
//     (etcd reads it back from the WAL's metadata, bootstrapClusterWithWAL), and so does
//     forceAlone, which only appends to the WAL. Once restore-snapshot has started, the
//     restored cluster's ID is accepted too, and only it (restoredClusterID), never any ID
//     but the plan's.
//   - Its history must be at least what the plan read, until the rebuild step has started:
//     from then on the step itself may have rewritten the log's tail (see
//     othersUnchangedSincePlan).
//
// A survivor that runs (its data dir locked) is not read: stop-all stops it, and the later
// steps check it over the etcd API. Once the rebuild has started, a data dir that cannot be
// read is the step's to finish (a restore moves the old data aside before the new moves in).
func (a *Applier) survivorAsPlanned(j *plan.Journal) error {
	p := a.Plan
	s := p.Member(p.Survivor)
	if s.Runbook != "" {
		if _, err := os.Stat(s.DataDir); err != nil {
			return nil // on the operator's node
		}
	}
	_, forcing := j.StartedAt(string(StepForceNewCluster))
	_, restoring := j.StartedAt(string(StepRestoreSnapshot))
	r, err := datadir.Inspect(s.DataDir, datadir.Options{WALDir: s.WALDir})
	switch {
	case errors.Is(err, datadir.ErrLocked):
		return nil
	case (err != nil || r.Identity == nil) && (forcing || restoring):
		return nil
	case err != nil || r.Identity == nil:
		return fmt.Errorf("%w: the survivor's data dir %s cannot be read now: %v", ErrStale, s.DataDir, err)
	}
	accepted := []etcdmedic.ClusterID{p.ClusterID}
	if restoring {
		restored, err := a.restoredClusterID()
		if err != nil {
			return err
		}
		accepted = append(accepted, restored)
	}
	if id := r.Identity.ClusterID; !slices.Contains(accepted, id) {
		return fmt.Errorf("%w: the survivor's data dir %s now holds data of cluster %s, the plan is for %s; nothing was changed: put the survivor's data back, or make a new plan", ErrStale, s.DataDir, id, idList(accepted))
	}
	if forcing || restoring || r.Backend == nil {
		return nil
	}
	if kept := max(r.Raft.LastIndex, r.Raft.HardState.Commit, r.Backend.ConsistentIndex); kept < p.Committed {
		return fmt.Errorf("%w: the survivor %s now has less history (index %d) than when the plan was made (%d); nothing was changed: put its data back, or make a new plan", ErrStale, s.Name, kept, p.Committed)
	}
	return nil
}

// restoreToken is the --initial-cluster-token restore-snapshot restores with.
func (a *Applier) restoreToken() string {
	return "etcdmedic-restore-" + a.Plan.CreatedAt.Format("20060102T150405Z")
}

// restoredClusterID is the cluster ID etcdutl snapshot restore gives the survivor restored by
// this plan: etcd derives it from the member IDs of the initial cluster, each from the
// member's peer URLs and the cluster token (membership.NewClusterFromURLsMap, which etcdutl
// calls), so it is known before the restore and no other cluster has it.
func (a *Applier) restoredClusterID() (etcdmedic.ClusterID, error) {
	urls, err := types.NewURLsMap(initialClusterOf(a.Plan.Member(a.Plan.Survivor)))
	if err != nil {
		return etcdmedic.NoID, fmt.Errorf("the survivor's peer URLs: %w", err)
	}
	c, err := membership.NewClusterFromURLsMap(zap.NewNop(), a.restoreToken(), urls)
	if err != nil {
		return etcdmedic.NoID, err
	}
	return etcdmedic.ClusterID(c.ID()), nil
}

func idList(ids []etcdmedic.ClusterID) string {
	var s []string
	for _, id := range ids {
		s = append(s, id.String())
	}
	return strings.Join(s, " or ")
}
