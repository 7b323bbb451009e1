package finding

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/etcdmedic/etcdmedic"

	"github.com/dustin/go-humanize"

	"github.com/etcdmedic/etcdmedic/cluster"
)

// Stable IDs of the findings about a live cluster.
const (
	IDQuorumLost          = "quorum-lost"
	IDQuorumAtRisk        = "quorum-at-risk"
	IDNoFaultTolerance    = "no-fault-tolerance"
	IDNoLeader            = "no-leader"
	IDLeadersDisagree     = "leaders-disagree"
	IDMemberCutOff        = "member-cut-off"
	IDClusterIDMismatch   = "cluster-id-mismatch"
	IDMemberUnstarted     = "member-unstarted"
	IDMemberUnreachable   = "member-unreachable"
	IDMemberNotVerified   = "member-not-verified"
	IDQuorumNotVerified   = "quorum-not-verified"
	IDEndpointNotMember   = "endpoint-not-member"
	IDEndpointUnreachable = "endpoint-unreachable"
	IDMemberLagging       = "member-lagging"
	IDLearnerNotPromoted  = "learner-not-promoted"
	IDTooManyLearners     = "too-many-learners"
	IDVersionSkew         = "version-skew"
	IDAlarmNoSpace        = "alarm-nospace"
	IDAlarmCorrupt        = "alarm-corrupt"
	IDDBNearQuota         = "db-near-quota"
	IDDefragDue           = "defrag-due"
	IDHashMismatch        = "hash-mismatch"
)

// ClusterRules are the thresholds of the live checks.
type ClusterRules struct {
	// LagEntries: a member whose applied index trails the leader's commit index by more is lagging.
	LagEntries uint64
	// MaxLearners is etcd's --max-learners (1 unless changed).
	MaxLearners int
	// QuotaBytes is assumed for members that do not report their quota (before v3.6).
	QuotaBytes int64
	// DefragMinBytes: a defragmentation is due when at least this much of the db is free space
	// and the db is at least twice its size in use.
	DefragMinBytes int64
	// Endpoints is how the remedies should address the cluster (etcdctl --endpoints).
	Endpoints string
}

// DefaultClusterRules are the thresholds `etcdmedic doctor` uses unless told otherwise.
func DefaultClusterRules() ClusterRules {
	return ClusterRules{LagEntries: 1000, MaxLearners: 1, QuotaBytes: 2 << 30, DefragMinBytes: 64 << 20}
}

// ForCluster judges a live view.
func ForCluster(v *cluster.View, rules ClusterRules) []Finding {
	var out []Finding
	add := func(fs ...Finding) { out = append(out, fs...) }
	if len(v.Members) == 0 {
		return nil // no member answered: nothing to judge (doctor says so and exits 3)
	}
	add(quorumFindings(v, rules)...)
	add(leaderFindings(v)...)
	add(strangerFindings(v, rules)...)
	add(memberFindings(v, rules)...)
	add(learnerFindings(v, rules)...)
	add(versionFindings(v)...)
	add(alarmFindings(v, rules)...)
	add(sizeFindings(v, rules)...)
	add(hashFindings(v)...)
	Sort(out)
	return out
}

func ctl(rules ClusterRules, args string) string {
	if rules.Endpoints == "" {
		return "etcdctl " + args
	}
	return "etcdctl --endpoints=" + rules.Endpoints + " " + args
}

func upDown(v *cluster.View) []Evidence {
	var ev []Evidence
	for _, m := range v.Members {
		state := stateText(m)
		role := "voter"
		if m.IsLearner {
			role = "learner"
		}
		ev = append(ev, Evidence{m.Label(), role + ", " + state})
	}
	return ev
}

// stateText is a member's state with what proves it, for evidence.
func stateText(m cluster.MemberView) string {
	switch {
	case m.State == cluster.StateUp:
		return "up"
	case !m.Started():
		return "never started"
	case m.State == cluster.StateNotProbed:
		return "not probed (none of its client URLs was among the endpoints probed)"
	case m.State == cluster.StateCutOff:
		state := "cut off: answers clients, names leader " + m.Probe.Status.Leader.String()
		if m.Probe.HealthErr != "" {
			state += ", linearizable read: " + m.Probe.HealthErr
		}
		return state
	}
	state := string(m.State)
	if m.Probe != nil && m.Probe.Error != "" {
		state += ": " + m.Probe.Error
	}
	return state
}

// quorumProof names what shows that a quorum exists, "" when nothing does.
func quorumProof(v *cluster.View) string {
	var named string
	for _, m := range v.Members {
		switch {
		case m.IsLearner || !m.Up():
		case m.Probe.Healthy:
			return m.Label() + "'s linearizable read succeeded"
		case named == "" && m.Probe.Status.Leader != etcdmedic.NoID:
			named = m.Label() + " names leader " + v.Label(m.Probe.Status.Leader)
		}
	}
	return named
}

// notVerified lists the members whose state the probes do not prove, with why.
func notVerified(v *cluster.View) []string {
	var out []string
	for _, m := range v.Members {
		if m.Unknown() {
			out = append(out, m.ShortLabel()+" "+stateText(m))
		}
	}
	return out
}

func quorumFindings(v *cluster.View, rules ClusterRules) []Finding {
	q := v.Quorum
	count := fmt.Sprintf("%d of %d up, %d needed", q.VotersUp, q.Voters, q.Needed)
	if q.CutOff > 0 {
		count += fmt.Sprintf(", %d of them cut off from the quorum", q.CutOff)
	}
	if q.Unknown > 0 {
		count += fmt.Sprintf(", %d not verified", q.Unknown)
	}
	ev := append([]Evidence{{"voters up / needed", count}}, upDown(v)...)
	switch {
	case q.ProvenLost():
		return []Finding{{
			ID: IDQuorumLost, Severity: Critical, Subject: "cluster " + v.ClusterID.String(),
			Summary:  fmt.Sprintf("Quorum is lost: %d of %d voters are up, %d are needed", q.VotersUp, q.Voters, q.Needed),
			Evidence: ev,
			Why:      "Without quorum the cluster accepts no writes and serves no linearizable reads: Kubernetes API servers stop working. Removing or re-adding members now cannot succeed and can destroy the data that is left (incident 2).",
			Remedy:   "Do not run member remove/add, kubeadm reset or kubeadm join now. First try to bring the down voters back as they are (restart etcd on their existing data dirs). If they are gone for good: stop every member, keep every data dir, run `etcdmedic inspect` on each to find the one with the most committed data, then rebuild from it (`etcdmedic recover plan`, or by hand: start it with --force-new-cluster, restart it without the flag, and add the others back one at a time as learners).",
		}}
	case q.Lost() && q.Unknown == 0 && !q.Proven:
		return nil // voters answer but none knows a leader (an election, or quorum lost): no-leader says so
	case q.Lost() || (q.Tolerance == 0 && q.Unknown > 0):
		return []Finding{quorumNotVerified(v, ev)}
	case q.Tolerance == 0 && q.InQuorum < q.Voters:
		return []Finding{{
			ID: IDQuorumAtRisk, Severity: Critical, Subject: "cluster " + v.ClusterID.String(),
			Summary:  fmt.Sprintf("Quorum is at risk: %d of %d voters are up, one more failure loses it", q.InQuorum, q.Voters),
			Evidence: ev,
			Why:      "The cluster works now, but one more voter down stops all writes.",
			Remedy:   "Bring the down voter back first (restart etcd on its data dir). Replace it only if its data is lost, and then the safe way: " + ctl(rules, "member remove <ID>") + ", move its old data dir aside, " + ctl(rules, "member add <NAME> --learner --peer-urls=<URL>") + ", start it with --initial-cluster-state=existing, promote it once caught up (`etcdmedic member replace` automates this). Do not touch the healthy voters meanwhile.",
		}}
	case q.Tolerance == 0 && q.Voters > 0:
		return []Finding{{
			ID: IDNoFaultTolerance, Severity: Info, Subject: "cluster " + v.ClusterID.String(),
			Summary:  fmt.Sprintf("The cluster has %d voter(s): it tolerates no failure", q.Voters),
			Evidence: ev,
			Why:      "With 1 or 2 voters, losing one member loses quorum.",
			Remedy:   "For production, run 3 or 5 voters.",
		}}
	}
	return nil
}

// quorumNotVerified is the quorum finding when the verdict depends on voters doctor could not
// ask: it never says lost, and it is critical only when no voter shows a quorum or the ones
// that could make one up are too few even counting every unverified voter.
func quorumNotVerified(v *cluster.View, ev []Evidence) Finding {
	q := v.Quorum
	proof := quorumProof(v)
	f := Finding{
		ID: IDQuorumNotVerified, Severity: Warning, Subject: "cluster " + v.ClusterID.String(),
		Evidence: append([]Evidence{{"quorum shown by", orNone(proof)}}, ev...),
	}
	unknown := strings.Join(notVerified(v), "; ")
	switch {
	case q.Lost() && (!q.Proven || q.InQuorum+q.Unknown < q.Needed):
		f.Severity = Critical
		f.Summary = fmt.Sprintf("Quorum is not verified: %d of %d voters are in the quorum, %d needed", q.InQuorum, q.Voters, q.Needed)
		if q.CutOff > 0 {
			f.Summary += fmt.Sprintf("; %d answer but are cut off from it", q.CutOff)
		}
		if unknown != "" {
			f.Summary += "; not verified: " + unknown
		}
		f.Why = "The members doctor reached cannot show that the cluster commits anything, and the others could not be asked: quorum may be lost, or this host may only be cut off from the members that hold it."
		f.Remedy = "Before acting, reach the members that were not verified: run doctor from a host that reaches every member's client URLs (without --no-discover), check their addresses, firewalls and certificates. Do not run member remove/add, kubeadm reset or recover on this evidence; if they really are down, follow quorum-lost."
	case q.Lost():
		f.Summary = fmt.Sprintf("Quorum holds (%s) but only %d of %d voters were verified in it: %s", proof, q.InQuorum, q.Voters, unknown)
		f.Why = "doctor counts a member it could not ask as neither up nor down: how many more failures the cluster tolerates is unknown."
		f.Remedy = "Run doctor without --no-discover (it probes only the given endpoints) from a host that reaches every member's client URLs; check the addresses, firewalls and certificates of the members not verified."
	default:
		f.Summary = fmt.Sprintf("Quorum holds with %d of %d voters up, %d needed; not verified: %s. If those are down, one more failure loses quorum", q.InQuorum, q.Voters, q.Needed, unknown)
		f.Why = "doctor counts a member it could not ask as neither up nor down: the cluster may tolerate no further failure."
		f.Remedy = "Check that this host reaches the members not verified (their client URLs, firewalls, certificates) and run doctor again; if they are down, restart etcd on their existing data dirs before touching any other member."
	}
	return f
}

func leaderFindings(v *cluster.View) []Finding {
	up := 0
	for _, m := range v.Members {
		if m.Up() {
			up++
		}
	}
	if up == 0 {
		return nil
	}
	var ev []Evidence
	ids := slices.Sorted(maps.Keys(v.Leaders))
	for _, id := range ids {
		ev = append(ev, Evidence{"leader " + id.String() + " according to", strings.Join(v.Leaders[id], ",")})
	}
	if len(v.Leaders) == 0 {
		var errs []Evidence
		for _, m := range v.Members {
			if m.Up() && len(m.Probe.Status.Errors) > 0 {
				errs = append(errs, Evidence{m.Label() + " errors", strings.Join(m.Probe.Status.Errors, "; ")})
			}
		}
		return []Finding{{
			ID: IDNoLeader, Severity: Critical, Subject: "cluster " + v.ClusterID.String(),
			Summary:  fmt.Sprintf("No member that answered knows a leader (%d answered)", up),
			Evidence: errs,
			Why:      "Without a leader nothing is committed: no writes, no linearizable reads.",
			Remedy:   "If quorum is lost, see quorum-lost. Otherwise check the network between members (peer port) and the members' logs for \"lost leader\" or election loops; a leader usually appears within a few seconds.",
		}}
	}
	var out []Finding
	if v.Quorum.InQuorum > 0 {
		// Some voter is in the quorum; a member that answers but is not in it (names no leader)
		// is cut off from its peers, and one whose linearizable read failed may be.
		for _, m := range v.Members {
			if m.State != cluster.StateCutOff && !(m.Up() && m.Probe.ReadFailed()) {
				continue
			}
			ev := []Evidence{{m.Label() + " names leader", m.Probe.Status.Leader.String()}}
			if len(m.Probe.Status.Errors) > 0 {
				ev = append(ev, Evidence{m.Label() + " errors", strings.Join(m.Probe.Status.Errors, "; ")})
			}
			if m.Probe.HealthErr != "" {
				ev = append(ev, Evidence{m.Label() + " linearizable read", m.Probe.HealthErr})
			}
			why := "It serves only stale serializable reads, and as a voter it does not count toward quorum while cut off."
			if m.State != cluster.StateCutOff {
				why = "It names the leader the others name, but its linearizable read failed: it is cut off from the leader (it stops naming one within an election timeout, and then does not count toward quorum), or the cluster is too busy to answer within the command timeout."
			}
			if m.IsLearner {
				why = "It serves only stale serializable reads, and as a learner it cannot catch up to be promoted while cut off."
			}
			out = append(out, Finding{
				ID: IDMemberCutOff, Severity: Warning, Subject: m.Label(),
				Summary:  fmt.Sprintf("Member %s answers clients but is cut off from the leader", m.Label()),
				Evidence: append(ev, Evidence{"leader according to the others", v.Leader().String()}),
				Why:      why,
				Remedy:   fmt.Sprintf("Check the peer network between it and the others (its peer URLs %s, firewalls, DNS) and its log for \"lost leader\" or \"prober detected unhealthy status\".", strings.Join(m.PeerURLs, ",")),
			})
		}
	}
	if len(v.Leaders) > 1 {
		out = append(out, Finding{
			ID: IDLeadersDisagree, Severity: Warning, Subject: "cluster " + v.ClusterID.String(),
			Summary:  fmt.Sprintf("Members disagree on the leader: %d different leaders reported", len(v.Leaders)),
			Evidence: ev,
			Why:      "Right after an election this settles within a heartbeat; if it persists, some members are cut off from the others.",
			Remedy:   "Run doctor again in a few seconds; if it persists, check the peer network of the members that name a different leader.",
		})
	}
	return out
}

func strangerFindings(v *cluster.View, rules ClusterRules) []Finding {
	var out []Finding
	for _, p := range v.Strangers {
		st := p.Status
		if st.ClusterID != v.ClusterID {
			out = append(out, Finding{
				ID: IDClusterIDMismatch, Severity: Critical, Subject: p.Endpoint,
				Summary:  fmt.Sprintf("%s belongs to another cluster (%s, not %s)", p.Endpoint, st.ClusterID, v.ClusterID),
				Evidence: []Evidence{{"cluster ID of " + p.Endpoint, st.ClusterID.String()}, {"cluster ID of the others", v.ClusterID.String()}, {"member ID", st.MemberID.String()}},
				Why:      "An endpoint of another cluster in the same list splits clients between two datasets; a member restarted on an old or foreign data dir runs under that data's cluster ID and never joins (incident 1).",
				Remedy:   fmt.Sprintf("Take %s out of the endpoint list, or, if it should be a member of %s: stop it, move its data dir aside (never delete it; `etcdmedic inspect` it), and add it back as a new member (%s).", p.Endpoint, v.ClusterID, ctl(rules, "member add <NAME> --learner --peer-urls=<URL>")),
			})
			continue
		}
		out = append(out, Finding{
			ID: IDEndpointNotMember, Severity: Warning, Subject: p.Endpoint,
			Summary:  fmt.Sprintf("%s answers as member %s, which is not in the cluster's membership", p.Endpoint, st.MemberID),
			Evidence: []Evidence{{"member ID of " + p.Endpoint, st.MemberID.String()}, {"members", viewMemberIDs(v)}},
			Why:      "A member that was removed keeps running on its old data until stopped: clients and load balancers that still use it get errors or stale answers (pd-2 of incident 1).",
			Remedy:   fmt.Sprintf("Stop the process behind %s and move its data dir aside (never delete it). If it should be a member again, add it back as a new member with an empty data dir: %s, then start it with --initial-cluster-state=existing.", p.Endpoint, ctl(rules, "member add <NAME> --learner --peer-urls=<URL>")),
		})
	}
	for _, p := range v.Unmatched {
		out = append(out, Finding{
			ID: IDEndpointUnreachable, Severity: Warning, Subject: p.Endpoint,
			Summary:  fmt.Sprintf("%s did not answer and is no known member's client URL", p.Endpoint),
			Evidence: []Evidence{{"error", p.Error}},
			Why:      "An endpoint list that names dead or wrong addresses slows every client down.",
			Remedy:   "Check the address, or drop it from the endpoint list.",
		})
	}
	return out
}

func viewMemberIDs(v *cluster.View) string {
	var ids []string
	for _, m := range v.Members {
		ids = append(ids, m.ID.String())
	}
	return strings.Join(ids, ",")
}

func memberFindings(v *cluster.View, rules ClusterRules) []Finding {
	var out []Finding
	leader := v.MemberByID(v.Leader())
	for _, m := range v.Members {
		switch {
		case !m.Started():
			out = append(out, Finding{
				ID: IDMemberUnstarted, Severity: Warning, Subject: m.Label(),
				Summary:  fmt.Sprintf("Member %s is in the membership but never started (no name or client URLs)", m.ID),
				Evidence: []Evidence{{"member list", fmt.Sprintf("id=%s name=%q peerURLs=%s clientURLs=%s learner=%v", m.ID, m.Name, strings.Join(m.PeerURLs, ","), strings.Join(m.ClientURLs, ","), m.IsLearner)}},
				Why:      "A member that was added but whose process never joined still counts as a voter: it weakens quorum, and it blocks further member adds (incident 1's \"pd-4\").",
				Remedy:   fmt.Sprintf("Start the member it was added for (empty data dir, --initial-cluster-state=existing, peer URL %s), or remove the entry: %s", strings.Join(m.PeerURLs, ","), ctl(rules, "member remove "+m.ID.String())),
			})
		case m.State == cluster.StateNotProbed:
			out = append(out, Finding{
				ID: IDMemberNotVerified, Severity: Warning, Subject: m.Label(),
				Summary:  fmt.Sprintf("Member %s was not probed: none of its client URLs (%s) was among the endpoints probed", m.Label(), strings.Join(m.ClientURLs, ",")),
				Evidence: []Evidence{{"state", "not probed (--no-discover probes only the given endpoints)"}},
				Why:      "doctor counts a member it did not ask as neither up nor down: its part in the quorum is not verified.",
				Remedy:   fmt.Sprintf("Run doctor without --no-discover, or add %s to --endpoints.", firstURL(m)),
			})
		case m.State == cluster.StateCouldNotProbe:
			out = append(out, Finding{
				ID: IDMemberNotVerified, Severity: Warning, Subject: m.Label(),
				Summary:  fmt.Sprintf("Member %s could not be probed on %s", m.Label(), strings.Join(m.ClientURLs, ",")),
				Evidence: []Evidence{{"error", m.Probe.Error}},
				Why:      "A probe that cannot connect proves nothing: the member may be down, or only unreachable from this host (firewall, routing, certificates). doctor counts it as neither up nor down.",
				Remedy:   "Check that this host reaches its client URLs and that the certificates (--cacert/--cert/--key) are right, then run doctor again; if the member is down, restart etcd on its existing data dir.",
			})
		case !m.Up():
			errText := "connection refused"
			if m.Probe != nil && m.Probe.Error != "" {
				errText = m.Probe.Error
			}
			out = append(out, Finding{
				ID: IDMemberUnreachable, Severity: Warning, Subject: m.Label(),
				Summary:  fmt.Sprintf("Member %s does not answer on %s", m.Label(), strings.Join(m.ClientURLs, ",")),
				Evidence: []Evidence{{"error", errText}},
				Why:      "Nothing listens at its client URLs: the member is down and no longer counts toward quorum.",
				Remedy:   "Restart etcd on that node with its existing data dir; inspect the data dir offline first if it crashed (`etcdmedic inspect <data-dir>`).",
			})
		case leader != nil && leader.Up() && m.ID != leader.ID:
			lead := leader.Probe.Status.RaftIndex
			applied := m.Probe.Status.AppliedIndex
			if applied == 0 {
				applied = m.Probe.Status.RaftIndex
			}
			if lead > applied && lead-applied > rules.LagEntries {
				out = append(out, Finding{
					ID: IDMemberLagging, Severity: Warning, Subject: m.Label(),
					Summary:  fmt.Sprintf("Member %s trails the leader by %d entries", m.Label(), lead-applied),
					Evidence: []Evidence{{"leader raft index", fmt.Sprint(lead)}, {m.Label() + " applied index", fmt.Sprint(applied)}, {"threshold", fmt.Sprint(rules.LagEntries)}},
					Why:      "A lagging member serves stale serializable reads and, if it is a voter, weakens quorum in practice.",
					Remedy:   "Check its disk (fsync latency) and network; a member far behind catches up by snapshot. If it never catches up, replace it (`etcdmedic member replace`).",
				})
			}
		}
	}
	return out
}

func learnerFindings(v *cluster.View, rules ClusterRules) []Finding {
	var out []Finding
	var learners []string
	leader := v.MemberByID(v.Leader())
	for _, m := range v.Members {
		if !m.IsLearner {
			continue
		}
		learners = append(learners, m.Label())
		if !m.Up() || leader == nil || !leader.Up() {
			continue
		}
		lead, applied := leader.Probe.Status.RaftIndex, m.Probe.Status.AppliedIndex
		if lead <= applied || lead-applied <= rules.LagEntries {
			out = append(out, Finding{
				ID: IDLearnerNotPromoted, Severity: Warning, Subject: m.Label(),
				Summary:  fmt.Sprintf("Learner %s has caught up but is still a learner", m.Label()),
				Evidence: []Evidence{{"leader raft index", fmt.Sprint(lead)}, {"learner applied index", fmt.Sprint(applied)}},
				Why:      "A learner does not vote: until it is promoted the cluster has less fault tolerance than it seems, and etcd allows only --max-learners learners at a time, so the next add fails.",
				Remedy:   ctl(rules, "member promote "+m.ID.String()),
			})
		}
	}
	if len(learners) > rules.MaxLearners {
		out = append(out, Finding{
			ID: IDTooManyLearners, Severity: Warning, Subject: "cluster " + v.ClusterID.String(),
			Summary:  fmt.Sprintf("%d learners, more than --max-learners=%d", len(learners), rules.MaxLearners),
			Evidence: []Evidence{{"learners", strings.Join(learners, ", ")}},
			Why:      "etcd refuses further learners; etcd v3.6 refuses to start on a membership with more learners than allowed (\"too many learner members in cluster\").",
			Remedy:   "Promote the caught-up learners one at a time, or remove the ones that will never be promoted.",
		})
	}
	return out
}

func versionFindings(v *cluster.View) []Finding {
	versions := map[string][]string{}
	for _, m := range v.Members {
		if m.Up() {
			versions[m.Probe.Status.Version] = append(versions[m.Probe.Status.Version], m.Label())
		}
	}
	if len(versions) < 2 {
		return nil
	}
	var ev []Evidence
	var vs []string
	for ver := range versions {
		vs = append(vs, ver)
	}
	sort.Strings(vs)
	for _, ver := range vs {
		ev = append(ev, Evidence{"version " + ver, strings.Join(versions[ver], ", ")})
	}
	return []Finding{{
		ID: IDVersionSkew, Severity: Warning, Subject: "cluster " + v.ClusterID.String(),
		Summary:  fmt.Sprintf("Members run %d different etcd versions: %s", len(vs), strings.Join(vs, ", ")),
		Evidence: ev,
		Why:      "Mixed versions are expected only during a rolling upgrade; the cluster runs at the lowest version's feature level, and some moves (v3.5 to v3.6 with stale membership) fail half way (incident 3).",
		Remedy:   "Finish the rolling upgrade (or downgrade) one member at a time; before moving to v3.6, check membership drift on a stopped member with `etcdmedic inspect` (`etcdmedic upgrade check` once available).",
	}}
}

func alarmFindings(v *cluster.View, rules ClusterRules) []Finding {
	seen := map[string]bool{}
	var out []Finding
	for _, m := range v.Members {
		if !m.Up() {
			continue
		}
		for _, a := range m.Probe.Alarms {
			key := a.MemberID.String() + "/" + a.Alarm
			if seen[key] {
				continue
			}
			seen[key] = true
			member := v.Label(a.MemberID)
			switch a.Alarm {
			case "NOSPACE":
				out = append(out, Finding{
					ID: IDAlarmNoSpace, Severity: Critical, Subject: member,
					Summary:  "NOSPACE alarm raised: the cluster refuses writes",
					Evidence: []Evidence{{"alarm", a.Alarm + " on " + member}},
					Why:      "A member's db reached its quota (--quota-backend-bytes); until the alarm is cleared every write fails with \"mvcc: database space exceeded\".",
					Remedy:   fmt.Sprintf("Free space and clear the alarm: %s; %s (one member at a time); %s. Raise --quota-backend-bytes if the data really needs more.", ctl(rules, "compact $(etcdctl endpoint status -w json | jq '.[0].Status.header.revision')"), ctl(rules, "defrag --endpoints=<each member>"), ctl(rules, "alarm disarm")),
				})
			case "CORRUPT":
				out = append(out, Finding{
					ID: IDAlarmCorrupt, Severity: Critical, Subject: member,
					Summary:  "CORRUPT alarm raised: members disagree on data",
					Evidence: []Evidence{{"alarm", a.Alarm + " on " + member}},
					Why:      "etcd's corruption check found a member whose data differs; the cluster refuses writes until the alarm is cleared.",
					Remedy:   "Find the member that differs (`etcdmedic doctor --check-hash`), replace it from the healthy ones (remove it, move its data dir aside, add it back as a learner), then " + ctl(rules, "alarm disarm"),
				})
			}
		}
	}
	return out
}

func sizeFindings(v *cluster.View, rules ClusterRules) []Finding {
	var out []Finding
	for _, m := range v.Members {
		if !m.Up() {
			continue
		}
		st := m.Probe.Status
		quota, source := st.DBSizeQuota, "reported by the member"
		if quota <= 0 {
			quota, source = rules.QuotaBytes, "assumed (etcd before v3.6 does not report it; set --quota-backend-bytes)"
		}
		if quota > 0 && float64(st.DBSize) >= 0.8*float64(quota) {
			sev := Warning
			if float64(st.DBSize) >= 0.95*float64(quota) {
				sev = Critical
			}
			out = append(out, Finding{
				ID: IDDBNearQuota, Severity: sev, Subject: m.Label(),
				Summary:  fmt.Sprintf("%s's db is %s of its %s quota (%.0f%%)", m.Label(), humanize.IBytes(uint64(st.DBSize)), humanize.IBytes(uint64(quota)), 100*float64(st.DBSize)/float64(quota)),
				Evidence: []Evidence{{"db size", fmt.Sprint(st.DBSize)}, {"db size in use", fmt.Sprint(st.DBSizeInUse)}, {"quota", fmt.Sprintf("%d (%s)", quota, source)}},
				Why:      "At the quota etcd raises NOSPACE and refuses every write.",
				Remedy:   fmt.Sprintf("Compact old revisions and defragment one member at a time (%s), or raise --quota-backend-bytes on every member.", ctl(rules, "defrag --endpoints="+firstURL(m))),
			})
		}
		free := st.DBSize - st.DBSizeInUse
		if st.DBSizeInUse > 0 && free >= rules.DefragMinBytes && st.DBSize >= 2*st.DBSizeInUse {
			out = append(out, Finding{
				ID: IDDefragDue, Severity: Warning, Subject: m.Label(),
				Summary:  fmt.Sprintf("%s's db is %s but only %s is in use: defragmentation is due", m.Label(), humanize.IBytes(uint64(st.DBSize)), humanize.IBytes(uint64(st.DBSizeInUse))),
				Evidence: []Evidence{{"db size", fmt.Sprint(st.DBSize)}, {"db size in use", fmt.Sprint(st.DBSizeInUse)}},
				Why:      "Free pages count against the quota and slow snapshots and member catch-up.",
				Remedy:   fmt.Sprintf("Defragment one member at a time, followers first (it blocks that member while it runs): %s", ctl(rules, "defrag --endpoints="+firstURL(m))),
			})
		}
	}
	return out
}

func firstURL(m cluster.MemberView) string {
	if len(m.ClientURLs) > 0 {
		return m.ClientURLs[0]
	}
	return "<client URL>"
}

func hashFindings(v *cluster.View) []Finding {
	// Hashes compare only between members compacted at the same revision (as etcd's own
	// corruption check does): a different compaction hashes a different range.
	byCompact := map[int64]map[uint32][]string{}
	var rev int64
	for _, m := range v.Members {
		if m.Up() && m.Probe.Hash != nil && m.Probe.Hash.Error == "" {
			h := m.Probe.Hash
			if byCompact[h.CompactRevision] == nil {
				byCompact[h.CompactRevision] = map[uint32][]string{}
			}
			byCompact[h.CompactRevision][h.Hash] = append(byCompact[h.CompactRevision][h.Hash], m.Label())
			rev = h.Revision
		}
	}
	var hashes map[uint32][]string
	for _, group := range byCompact {
		if len(group) > 1 {
			hashes = group
		}
	}
	if len(hashes) < 2 {
		return nil
	}
	var ev []Evidence
	for h, who := range hashes {
		ev = append(ev, Evidence{fmt.Sprintf("hash %d at revision %d", h, rev), strings.Join(who, ", ")})
	}
	sort.Slice(ev, func(i, j int) bool { return ev[i].What < ev[j].What })
	return []Finding{{
		ID: IDHashMismatch, Severity: Critical, Subject: fmt.Sprintf("revision %d", rev),
		Summary:  fmt.Sprintf("Members disagree on the data at revision %d (%d different hashes)", rev, len(hashes)),
		Evidence: ev,
		Why:      "The same revision must hash the same on every member: some member holds different data (corruption, or a bug). Reads from it return wrong answers.",
		Remedy:   "Find the odd member out (the minority hash), stop it, move its data dir aside (keep it for analysis), and add it back as a new learner so it copies the majority's data.",
	}}
}
