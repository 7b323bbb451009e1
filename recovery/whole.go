package recovery

import (
	"fmt"
	"strings"

	"github.com/etcdmedic/etcdmedic/datadir"
)

// checkWhole reads a survivor candidate's data dir whole before it is chosen: every WAL
// record's CRC and every db page. A damaged page forced into a new cluster would be streamed
// to every member that rejoins. It returns the problem, or "".
func checkWhole(dataDir, walDir string) string {
	r, err := datadir.Inspect(dataDir, datadir.Options{Deep: true, WALDir: walDir})
	switch {
	case err != nil:
		return "its data cannot be read whole: " + err.Error()
	case r.Raft == nil || r.Backend == nil:
		return "its data cannot be read whole: " + r.BackendError
	case walDamage(r.Raft.Tail, r.Raft.HardState.Commit) != "":
		return walDamage(r.Raft.Tail, r.Raft.HardState.Commit)
	case r.Backend.Deep != nil && r.Backend.Deep.PageErrorCount+len(r.Backend.Deep.PageErrors) > 0:
		errs := r.Backend.Deep.PageErrors
		return fmt.Sprintf("its db has damaged pages (%d problems: %s)", max(r.Backend.Deep.PageErrorCount, len(errs)), strings.Join(errs[:min(3, len(errs))], "; "))
	}
	return ""
}

// walTail judges how a member's WAL ends. A torn or cut-short last record is what a crash
// leaves; etcd cuts it at start (wal.Repair) and so does etcdmedic. An invalid raft log (a term
// going down, an index gap) in the newest segment, starting past the commit index, is cut at
// the last valid entry: what follows it is not history (cut says so). Anything else is damage.
func walTail(t *datadir.TailProblem, commit uint64) (damage, cut string) {
	switch {
	case t == nil, t.Kind == "torn-write", t.Kind == "truncated":
		return "", ""
	case t.Kind == "invalid-log" && t.Newest && t.InvalidFrom > commit:
		return "", fmt.Sprintf("its WAL is cut before entry %d (%s); the cut bytes stay in its backup", t.InvalidFrom, t.Detail)
	case t.Kind == "invalid-log":
		return fmt.Sprintf("its WAL is not a raft log at entry %d, at or below its commit index %d or before its newest segment: %s", t.InvalidFrom, commit, t.Detail), ""
	}
	return "its WAL is damaged: " + t.Detail, ""
}

func walDamage(t *datadir.TailProblem, commit uint64) string {
	damage, _ := walTail(t, commit)
	return damage
}
