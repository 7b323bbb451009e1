// Package guard decides whether a data dir may be started as a member of a live cluster, and
// moves aside (quarantines, never deletes) the data dirs that may not.
package guard

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/finding"
)

// Class is what a data dir is, relative to the live cluster it is about to join.
type Class string

const (
	// Empty: nothing there; a new member may join (after `member add`).
	Empty Class = "EMPTY"
	// Valid: same cluster, this member is live with these peer URLs.
	Valid Class = "VALID"
	// Foreign: another cluster's data (or an older incarnation of this one), or not etcd data.
	Foreign Class = "FOREIGN"
	// Removed: same cluster, but this member is no longer in the membership.
	Removed Class = "REMOVED"
	// Mismatched: the member is live, but its name or peer URLs are another member's.
	Mismatched Class = "MISMATCHED"
	// Unknown: the live cluster cannot be reached or has no quorum: never guess.
	Unknown Class = "UNKNOWN"
	// Unreadable: the user etcdmedic runs as cannot read the data dir (or a file of it): it
	// can neither be judged nor moved.
	Unreadable Class = "UNREADABLE"
	// Incomplete: half a member, its db without its WAL or its WAL (--wal-dir) without its db:
	// never judged by one half, never moved.
	Incomplete Class = "INCOMPLETE"
)

// SafeToStart is true for the classes a member may start on.
func (c Class) SafeToStart() bool { return c == Empty || c == Valid }

// Expect is what the member about to start will be.
type Expect struct {
	Name     string
	PeerURLs []string
	// Starts is set when a member is about to start on the data dir as this one (guard): the
	// probed endpoints (etcdctl's default 127.0.0.1:2379 included) must then be proven to be its
	// cluster before another cluster's data is called FOREIGN and moved: their membership
	// holds its peer URLs (or, with none given, its name). Unset for a report over volumes
	// (scan), and for a member the caller adds to the probed cluster itself (member add,
	// replace): the operator named that cluster as the member's.
	Starts bool
	// Bootstraps is set when the member starts with --initial-cluster-state=new (etcd's
	// default): on an empty data dir it forms a new cluster with the members of its
	// --initial-cluster, so that no member answers before it starts is what a bootstrap looks
	// like, not a doubt.
	Bootstraps bool
}

// knownTo is true when v's membership holds the expected member: by its peer URLs, as etcd
// matches a member; by its name only when no peer URLs are given.
func (e Expect) knownTo(v *cluster.View) bool {
	if len(e.PeerURLs) > 0 {
		return v.ByPeerURLs(e.PeerURLs) != nil
	}
	return v.ByName(e.Name) != nil
}

// Verdict is the classification with what it rests on.
type Verdict struct {
	Class Class `json:"class"`
	Safe  bool  `json:"safeToStart"`
	// Movable is false when --fix must not move the directory's contents even though the
	// member may not start on it: it holds files that are not etcd's (a wrong --data-dir).
	Movable  bool               `json:"movable"`
	Reason   string             `json:"reason"`
	Evidence []finding.Evidence `json:"evidence"`
	// LiveMember is the live membership's record of this data dir's member, when there is one.
	LiveMember *etcdmedic.Member `json:"liveMember,omitempty"`
}

// Classify compares a data dir (r; nil when the dir does not exist) with the live view.
func Classify(r *datadir.Report, v *cluster.View, want Expect) Verdict {
	reached := v != nil && len(v.Members) > 0
	if r == nil || r.Kind == datadir.KindEmpty {
		return classifyEmpty(v, reached, want)
	}
	if r.Kind == datadir.KindBootstrapLeftover {
		// etcd bootstraps again on the empty db a failed first start left: judged as empty.
		out := classifyEmpty(v, reached, want)
		out.Reason = "the data dir holds only the empty db a failed first start left (no WAL, consistent index 0, no revision, no members), which etcd reuses; as an empty data dir: " + out.Reason
		return withEvidence(out, append(out.Evidence, finding.Evidence{What: "data dir kind", Value: r.Kind}))
	}
	if r.Kind == datadir.KindDBFile {
		out := verdict(Foreign, "this is a bare db file, not a data dir: give the directory etcd runs with as --data-dir")
		out.Movable = false
		return out
	}
	if r.Kind == datadir.KindDataWithoutWAL || r.Kind == datadir.KindWALWithoutData {
		out := verdict(Incomplete, r.KindReason)
		out.Movable = false
		return withEvidence(out, []finding.Evidence{{What: "data dir kind", Value: r.Kind}, {What: "WAL dir", Value: r.WALDir}})
	}
	ev := []finding.Evidence{{What: "data dir kind", Value: r.Kind}}
	if r.Identity != nil {
		ev = append(ev,
			finding.Evidence{What: "data dir cluster ID", Value: r.Identity.ClusterID.String()},
			finding.Evidence{What: "data dir member ID", Value: r.Identity.MemberID.String()},
			finding.Evidence{What: "data dir member name", Value: orDash(r.Identity.Name)},
		)
	}
	if r.Raft != nil {
		ev = append(ev, finding.Evidence{What: dataRaft, Value: fmt.Sprintf("%d (%d)", r.Raft.LastIndex, r.Raft.LastTerm)})
	}
	if r.PDJoin != nil {
		ev = append(ev, finding.Evidence{What: "PD join file", Value: r.PDJoin.Contents})
	}
	if !answering(v) {
		why := "no member of the live cluster answered"
		switch {
		case reached && v.Quorum.Lost():
			why = fmt.Sprintf("the live cluster has no quorum (%d of %d voters up)", v.Quorum.VotersUp, v.Quorum.Voters)
		case reached:
			why = "the live cluster has no leader or serves no linearizable read"
		}
		return withEvidence(verdict(Unknown, why+": etcdmedic does not guess whether this data is still needed. If quorum is lost, this data dir may hold the most recent data: keep it, and recover quorum first (etcdmedic inspect each stopped member, then etcdmedic recover)."), ev)
	}
	ev = append(ev, finding.Evidence{What: "live cluster ID", Value: v.ClusterID.String()}, finding.Evidence{What: "live members", Value: liveMembers(v)})
	if st := leaderStatus(v); st != nil {
		// Beside the data dir's, never judged on: a member stopped normally is always behind.
		at := len(ev)
		if i := slices.IndexFunc(ev, func(e finding.Evidence) bool { return e.What == dataRaft }); i >= 0 {
			at = i + 1
		}
		ev = slices.Insert(ev, at, finding.Evidence{What: "live raft index (term)", Value: fmt.Sprintf("%d (%d), leader %s", st.RaftIndex, st.RaftTerm, v.Label(st.MemberID))})
	}
	if r.Kind == datadir.KindNotEtcd {
		out := verdict(Foreign, "the directory holds files that are not etcd data ("+r.KindReason+")")
		out.Movable = onlyEtcdNames(r.Path)
		if !out.Movable {
			out.Reason += ": etcdmedic will not move them; check --data-dir"
		}
		return withEvidence(out, ev)
	}
	if r.Identity == nil {
		// A member dir whose WAL names no cluster or member (torn before its metadata): whose
		// data it is cannot be told, so it is neither started on nor moved.
		out := verdict(Unreadable, "the data dir's WAL names no cluster and member ID: whose data this is cannot be told; etcdmedic inspect it")
		return withEvidence(out, ev)
	}
	if r.Identity.ClusterID != v.ClusterID && want.Starts && !want.knownTo(v) {
		// The data is not this cluster's, but this cluster may not be the member's either.
		return withEvidence(verdict(Unknown, fmt.Sprintf("the data belongs to cluster %s, not to the live cluster %s, but the endpoints probed (%s) may be another cluster's: their membership has no member %s. Give this cluster's endpoints; if these are, add the member first (etcdctl member add --learner) and run guard again", r.Identity.ClusterID, v.ClusterID, probed(v), want.describe())), ev)
	}
	if r.Identity.ClusterID != v.ClusterID {
		return withEvidence(verdict(Foreign, fmt.Sprintf("the data belongs to cluster %s, not to the live cluster %s: another cluster, or an older incarnation of this one. A member started on it runs under the old cluster ID and never joins (\"request cluster ID mismatch\")", r.Identity.ClusterID, v.ClusterID)), ev)
	}
	live := v.MemberByID(r.Identity.MemberID)
	if live == nil || r.Identity.RemovedMarked {
		return withEvidence(verdict(Removed, fmt.Sprintf("member %s is no longer in the live membership: it was removed. etcd started on this data exits with \"the member has been permanently removed from the cluster\"", r.Identity.MemberID)), ev)
	}
	out := verdict(Valid, fmt.Sprintf("member %s is live in cluster %s", r.Identity.MemberID, v.ClusterID))
	out.LiveMember = &live.Member
	ev = append(ev, finding.Evidence{What: "live record", Value: fmt.Sprintf("name=%q peerURLs=%s", live.Name, strings.Join(live.PeerURLs, ","))})
	var clash []string
	if want.Name != "" && live.Name != "" && live.Name != want.Name {
		clash = append(clash, fmt.Sprintf("the live member %s is named %q, this member will start as %q", live.ID, live.Name, want.Name))
	}
	if len(want.PeerURLs) > 0 && !sameURLs(live.PeerURLs, want.PeerURLs) {
		clash = append(clash, fmt.Sprintf("the live member %s has peer URLs %s, this member will advertise %s", live.ID, strings.Join(live.PeerURLs, ","), strings.Join(want.PeerURLs, ",")))
	}
	if len(clash) > 0 {
		// Not moved by --fix: it may be a live member's real data with a wrong --name or
		// --peer-urls; the fix is the configuration.
		out.Class, out.Safe, out.Movable = Mismatched, false, false
		out.Reason = "the data dir's member is live, but as another member: " + strings.Join(clash, "; ") + ". Fix --name/--peer-urls (etcdmedic will not move a live member's data)"
	}
	return withEvidence(out, ev)
}

// classifyEmpty judges an empty (or missing) data dir: safe for a member the live cluster has
// added but that never started; not for one that has started (its data is gone: etcd panics
// on an empty log), nor for one not added yet; and not judged at all when the member's peer
// URLs were given but the live cluster could not be asked about them.
func classifyEmpty(v *cluster.View, reached bool, want Expect) Verdict {
	out := verdict(Empty, "the data dir is empty: a new member may join here once it has been added (etcdctl member add)")
	if !reached {
		switch {
		case want.Bootstraps:
			out.Reason = "the data dir is empty and the member starts with --initial-cluster-state=new: no member answers yet, as before a new cluster forms; it bootstraps with the members of its --initial-cluster"
		case len(want.PeerURLs) > 0:
			out = verdict(Unknown, fmt.Sprintf("the data dir is empty, and no member of the live cluster answered: etcdmedic cannot tell whether the member with peer URLs %s ran before and lost its data (etcd panics on it), is new, or bootstraps a new cluster (then say so: --initial-cluster-state new)", strings.Join(want.PeerURLs, ",")))
		}
		return out
	}
	live := v.ByName(want.Name)
	if len(want.PeerURLs) > 0 {
		live = v.ByPeerURLs(want.PeerURLs) // etcd matches a joining member by its peer URLs
	}
	switch {
	case live != nil && live.Started():
		// kubeadm reset, a wiped or replaced volume: the member's record stays, its log is gone.
		out.Safe, out.LiveMember = false, &live.Member
		out.Reason = fmt.Sprintf("this member ran before and its data is gone: member %s (peer URLs %s) has started in the live cluster, and its data dir is empty. etcd started on it panics (\"tocommit(N) is out of range [lastIndex(0)]\"): replace it (etcdmedic member replace, or remove it and add it back)", live.Label(), strings.Join(live.PeerURLs, ","))
		return withEvidence(out, []finding.Evidence{{What: "live record", Value: fmt.Sprintf("name=%q peerURLs=%s clientURLs=%s", live.Name, strings.Join(live.PeerURLs, ","), strings.Join(live.ClientURLs, ","))}})
	case live == nil && len(want.PeerURLs) > 0:
		out.Safe = false
		out.Reason = fmt.Sprintf("the data dir is empty, but no member of the live cluster has peer URLs %s yet: add it first (etcdctl member add --learner), or etcd started with --initial-cluster-state=new would bootstrap a separate cluster", strings.Join(want.PeerURLs, ","))
	}
	return out
}

func verdict(c Class, reason string) Verdict {
	return Verdict{Class: c, Safe: c.SafeToStart(), Movable: !c.SafeToStart() && c != Unknown && c != Unreadable, Reason: reason, Evidence: []finding.Evidence{}}
}

const dataRaft = "data dir last raft index (term)"

// probed lists the endpoints the view was built from.
func probed(v *cluster.View) string {
	var eps []string
	for _, p := range v.Probes {
		eps = append(eps, p.Endpoint)
	}
	return strings.Join(eps, ",")
}

// describe names the expected member for an operator.
func (e Expect) describe() string {
	switch {
	case len(e.PeerURLs) > 0:
		return "with peer URLs " + strings.Join(e.PeerURLs, ",")
	case e.Name != "":
		return fmt.Sprintf("named %q", e.Name)
	}
	return "named by --name or --peer-urls (none were given)"
}

// leaderStatus is what the leader answered (its raft index and term), or nil.
func leaderStatus(v *cluster.View) *cluster.Status {
	if m := v.MemberByID(v.Leader()); m != nil && m.Probe != nil && m.Probe.Status != nil {
		return m.Probe.Status
	}
	return nil
}

// answering is true when the live cluster can judge: reached, with a quorum, a leader, and a
// linearizable read served.
func answering(v *cluster.View) bool {
	return v != nil && len(v.Members) > 0 && !v.Quorum.Lost() && len(v.Leaders) > 0 && anyHealthy(v)
}

// anyHealthy is true when some member served a linearizable read.
func anyHealthy(v *cluster.View) bool {
	for _, m := range v.Members {
		if m.Up() && m.Probe.Healthy {
			return true
		}
	}
	return false
}

// onlyEtcdNames is true when a directory holds nothing but what etcd or PD put in a data dir.
func onlyEtcdNames(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		switch e.Name() {
		case "member", "join":
		default:
			if !datadir.Ignorable[e.Name()] {
				return false
			}
		}
	}
	return true
}

func withEvidence(v Verdict, ev []finding.Evidence) Verdict {
	v.Evidence = ev
	return v
}

func liveMembers(v *cluster.View) string {
	var parts []string
	for _, m := range v.Members {
		parts = append(parts, fmt.Sprintf("%s=%s", orDash(m.Name), m.ID))
	}
	return strings.Join(parts, ",")
}

func sameURLs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
