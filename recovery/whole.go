package recovery

import (
	"fmt"
	"strings"

	"github.com/etcdmedic/etcdmedic/datadir"
)

// checkWhole reads a survivor candidate's data dir whole before it is chosen: every WAL
// record's CRC and every db page. A damaged page forced into a new cluster would be streamed
// to every member that rejoins. It returns the problem, or "".
func checkWhole(dataDir string) string {
	r, err := datadir.Inspect(dataDir, datadir.Options{Deep: true})
	switch {
	case err != nil:
		return "its data cannot be read whole: " + err.Error()
	case r.Raft == nil || r.Backend == nil:
		return "its data cannot be read whole: " + r.BackendError
	case r.Raft.Tail != nil && r.Raft.Tail.Kind != "torn-write" && r.Raft.Tail.Kind != "truncated":
		return "its WAL is damaged: " + r.Raft.Tail.Detail
	case r.Backend.Deep != nil && r.Backend.Deep.PageErrorCount+len(r.Backend.Deep.PageErrors) > 0:
		errs := r.Backend.Deep.PageErrors
		return fmt.Sprintf("its db has damaged pages (%d problems: %s)", max(r.Backend.Deep.PageErrorCount, len(errs)), strings.Join(errs[:min(3, len(errs))], "; "))
	}
	return ""
}
