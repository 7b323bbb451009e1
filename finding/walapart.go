package finding

import (
	"fmt"

	"github.com/etcdmedic/etcdmedic/datadir"
)

// Findings about a member whose WAL and data live apart (etcd's --wal-dir) and only one half
// is where etcd would look.
const (
	IDDataWithoutWAL    = "data-without-wal"
	IDWALWithoutData    = "wal-without-data"
	IDBootstrapLeftover = "bootstrap-leftover"
)

// leftoverFindings says what a failed first start left: not damage, but worth knowing why the
// member did not start.
func leftoverFindings(r *datadir.Report) []Finding {
	ev := []Evidence{{"data dir", r.Path}, {"db", r.Backend.Path}, {"WAL dir", orNone(r.WALDir)},
		{"db contents", fmt.Sprintf("consistent index %d, revision %d, %d member(s), %d bytes", r.Backend.ConsistentIndex, r.Backend.Revision, len(r.Backend.Members), r.Backend.FileBytes)}}
	return []Finding{{
		ID: IDBootstrapLeftover, Severity: Info, Subject: r.Path,
		Summary:  "Only an empty db is here: the leftover of a first start that failed before etcd created its WAL",
		Evidence: ev,
		Why:      "etcd creates member/snap/db before it joins its cluster and creates its WAL; a first start that failed in between (peers unreachable, the member not added) leaves this db and nothing else. With no WAL, etcd bootstraps again on the next start and reuses the db: nothing here was ever part of the cluster's data.",
		Remedy:   "Find why the first start failed in etcd's log (\"discovery failed\", \"cannot fetch cluster info\", a member not added yet: etcdctl member add --learner), then start the member again; this data dir may stay as it is.",
	}}
}

// apartFindings says what is wrong when one half of a member is missing: never a guess at
// where the other half is.
func apartFindings(r *datadir.Report) []Finding {
	ev := []Evidence{{"data dir", r.Path}, {"member dir", r.MemberDir}, {"WAL dir", orNone(r.WALDir)}, {"seen", r.KindReason}}
	switch r.Kind {
	case datadir.KindDataWithoutWAL:
		return []Finding{{
			ID: IDDataWithoutWAL, Severity: Critical, Subject: r.Path,
			Summary:  "The member's db is here, but its WAL is not where etcd reads it",
			Evidence: ev,
			Why:      "etcd decides whether a member exists by its WAL: started on this data dir without its WAL, it bootstraps a new member (or fails to join) and never uses this data, and a repair that backs up only this folder keeps a db without the log it depends on.",
			Remedy:   "Find how the member is run and give etcdmedic the same: --wal-dir PATH, or read it from the running member or its configuration (--from-process PID, --from-config FILE, --from-unit NAME). Do not start etcd here, and do not delete either folder, until both halves are found.",
		}}
	case datadir.KindWALWithoutData:
		return []Finding{{
			ID: IDWALWithoutData, Severity: Critical, Subject: r.WALDir,
			Summary:  "This WAL dir holds a member's log, but its data dir holds no db",
			Evidence: ev,
			Why:      "etcd would replay the log onto an empty backend: whatever was applied before the newest raft snapshot is missing, and the member serves a partial keyspace.",
			Remedy:   "Check that the data dir is the one this member runs with (the other half may be on another disk or mount). Keep the WAL dir as it is; if the data dir is lost, replace this member from a healthy one (member remove, quarantine, add back as a learner).",
		}}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
