package member

import (
	"fmt"
	"path/filepath"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/cluster"
)

// replaceRecord is what replace writes into its backup dir just before it removes OLD: after
// an interruption between that remove and the add, the evidence on a rerun that OLD, no
// longer a member, was removed by this same replace and not mistyped.
type replaceRecord struct {
	ClusterID   etcdmedic.ClusterID `json:"clusterID"`
	Old         etcdmedic.Member    `json:"old"`
	NewName     string              `json:"newName"`
	NewPeerURLs []string            `json:"newPeerURLs"`
}

// replaceRecordPath is the one record per cluster in dir: the latest replace's.
func replaceRecordPath(dir string, clusterID etcdmedic.ClusterID) string {
	return filepath.Join(dir, fmt.Sprintf("replace-cluster-%s.json", clusterID))
}

// writeReplaceRecord records, fsynced, that old of the cluster is about to be replaced by spec.
func writeReplaceRecord(dir string, clusterID etcdmedic.ClusterID, old etcdmedic.Member, spec JoinSpec) error {
	rec := replaceRecord{ClusterID: clusterID, Old: old, NewName: spec.Name, NewPeerURLs: spec.PeerURLs}
	return backup.WriteJSONAtomic(replaceRecordPath(dir, clusterID), rec)
}

// readReplaceRecord is the record in dir for the cluster, or nil when there is none (or it
// does not read: no evidence then).
func readReplaceRecord(dir string, clusterID etcdmedic.ClusterID) *replaceRecord {
	if dir == "" {
		return nil
	}
	var rec replaceRecord
	if err := backup.ReadJSON(replaceRecordPath(dir, clusterID), &rec); err != nil {
		return nil
	}
	return &rec
}

// shows reports whether the record is of this replace: old, of this cluster and no longer a
// member, replaced by a member of spec's name and peer URLs.
func (r *replaceRecord) shows(v *cluster.View, old string, spec JoinSpec) bool {
	return r != nil && r.ClusterID == v.ClusterID && r.Old.Is(old) && v.MemberByID(r.Old.ID) == nil &&
		r.NewName == spec.Name && sameURLs(r.NewPeerURLs, spec.PeerURLs)
}
