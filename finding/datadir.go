package finding

import (
	"fmt"
	"strings"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/datadir"
)

// Stable IDs of the findings about one data dir.
const (
	IDMembershipDrift     = "membership-drift"
	IDMemberRemoved       = "member-removed"
	IDMemberNotInCluster  = "member-not-in-own-membership"
	IDWALTornTail         = "wal-torn-tail"
	IDWALCorrupt          = "wal-corrupt"
	IDWALFilesIgnored     = "wal-files-ignored"
	IDBackendUnreadable   = "backend-unreadable"
	IDBackendCorrupt      = "backend-corrupt"
	IDSnapshotUnreadable  = "snapshot-unreadable"
	IDPDJoinUnknownMember = "pd-join-unknown-member"
	IDAlarmActive         = "alarm-active"
	IDV2CustomData        = "v2-custom-data"
)

// ForDataDir judges one inspected data dir.
func ForDataDir(r *datadir.Report) []Finding {
	var out []Finding
	if r.Kind == datadir.KindDBFile {
		out = append(out, backendFindings(r)...)
		out = append(out, driftFindings(r)...)
		Sort(out)
		return out
	}
	if r.Kind == datadir.KindDataWithoutWAL || r.Kind == datadir.KindWALWithoutData {
		return apartFindings(r)
	}
	if r.Kind == datadir.KindBootstrapLeftover {
		return leftoverFindings(r)
	}
	if r.Kind != datadir.KindEtcdMember && r.Kind != datadir.KindPDMember {
		return out
	}
	out = append(out, walFindings(r)...)
	out = append(out, backendFindings(r)...)
	out = append(out, selfFindings(r)...)
	out = append(out, driftFindings(r)...)
	out = append(out, pdJoinFindings(r)...)
	Sort(out)
	return out
}

func walFindings(r *datadir.Report) []Finding {
	var out []Finding
	// A WAL copied from a running member may end mid-record: that is the copy, not damage.
	if t := r.Raft.Tail; t != nil && !(r.LiveCopy != nil && t.Segment == r.Raft.Segments[len(r.Raft.Segments)-1].Name) {
		ev := []Evidence{
			{"segment", t.Segment}, {"offset", fmt.Sprint(t.Offset)}, {"problem", t.Kind + ": " + t.Detail},
			{"last good index", fmt.Sprint(r.Raft.LastIndex)}, {"hardState.commit", fmt.Sprint(r.Raft.HardState.Commit)},
		}
		// A torn or cut-short record at the very end of the newest segment is what a crash
		// mid-write leaves; etcd repairs it at start (wal.Repair). Anything else is damage.
		if t.Kind == "torn-write" || (t.Kind == "truncated" && t.Segment == r.Raft.Segments[len(r.Raft.Segments)-1].Name) {
			out = append(out, Finding{
				ID: IDWALTornTail, Severity: Warning, Subject: t.Segment,
				Summary:  "The last WAL record was only partly written (the member crashed mid-write)",
				Evidence: ev,
				Why:      "etcd cuts a torn last record when it starts; the record was never acknowledged, so nothing committed is lost. Any other copy of this WAL made now would carry the torn tail.",
				Remedy:   fmt.Sprintf("Back up the data dir first (cp -a %s %s.bak), then start the member normally: etcd repairs a torn tail at start.", r.Path, r.Path),
			})
		} else {
			out = append(out, Finding{
				ID: IDWALCorrupt, Severity: Critical, Subject: t.Segment,
				Summary:  "The WAL is damaged before its end: records after the damage cannot be read",
				Evidence: ev,
				Why:      "etcd refuses to start on a WAL whose records fail their CRC or do not decode; entries after the damage are unreadable here.",
				Remedy:   fmt.Sprintf("Do not start etcd on this data dir. If the cluster still has quorum, replace this member (etcdctl member remove %s, move %s aside, add it back as a learner with an empty data dir). If quorum is lost, this dir still holds history up to index %d for a recovery: keep it.", r.Identity.MemberID, r.Path, r.Raft.LastIndex),
			})
		}
	}
	if len(r.Raft.IgnoredWALFiles) > 0 {
		out = append(out, Finding{
			ID: IDWALFilesIgnored, Severity: Info, Subject: r.WALDir,
			Summary:  fmt.Sprintf("%d file(s) in the WAL dir end in .wal but are not named <seq>-<index>.wal: etcd ignores them", len(r.Raft.IgnoredWALFiles)),
			Evidence: []Evidence{{"ignored", strings.Join(r.Raft.IgnoredWALFiles, ", ")}, {"segments read", fmt.Sprint(r.Raft.WALSegments)}},
			Why:      "etcd reads only files named <seq>-<index>.wal (it logs \"ignored file in WAL directory\" for the others), so the member's log is the segments listed, and these files are not part of it.",
			Remedy:   fmt.Sprintf("Nothing to do for etcd. If they are copies of segments, move them out of %s (keep them), so that no one takes them for part of the log.", r.WALDir),
		})
	}
	if r.Raft.SnapshotError != "" {
		out = append(out, Finding{
			ID: IDSnapshotUnreadable, Severity: Warning, Subject: "member/snap",
			Summary:  "A raft snapshot file the WAL refers to cannot be read",
			Evidence: []Evidence{{"error", r.Raft.SnapshotError}},
			Why:      "etcd falls back to an older snapshot, or fails to start if none is usable; the v2 membership shown here may be incomplete.",
			Remedy:   "Keep the file (do not delete it). If the member fails to start, replace it from a healthy member (remove, quarantine this dir, add back as a learner).",
		})
	}
	return out
}

func backendFindings(r *datadir.Report) []Finding {
	var out []Finding
	if r.BackendError != "" {
		out = append(out, Finding{
			ID: IDBackendUnreadable, Severity: Critical, Subject: "member/snap/db",
			Summary:  "The backend database (member/snap/db) cannot be read",
			Evidence: []Evidence{{"error", r.BackendError}},
			Why:      "etcd cannot start without its backend; the keys, leases and v3 membership live there.",
			Remedy:   fmt.Sprintf("Do not start etcd on this data dir and keep it as evidence. Replace the member from a healthy one (remove it, move %s aside, add it back as a learner), or restore from a snapshot (etcdutl snapshot restore) if no healthy member is left.", r.Path),
		})
	}
	be := r.Backend
	if be == nil {
		return out
	}
	if be.Deep != nil && len(be.Deep.PageErrors) > 0 {
		out = append(out, Finding{
			ID: IDBackendCorrupt, Severity: Critical, Subject: "member/snap/db",
			Summary:  fmt.Sprintf("The backend's page check found %d problem(s)", max(be.Deep.PageErrorCount, len(be.Deep.PageErrors))),
			Evidence: []Evidence{{"first problem", be.Deep.PageErrors[0]}},
			Why:      "A corrupt bbolt file can crash etcd or serve wrong data.",
			Remedy:   "Replace this member from a healthy one, or restore the cluster from a snapshot; keep this file for analysis.",
		})
	}
	for _, a := range be.Alarms {
		out = append(out, Finding{
			ID: IDAlarmActive, Severity: Warning, Subject: a.MemberID.String(),
			Summary:  fmt.Sprintf("Alarm %s is raised for member %s", a.Alarm, a.MemberID),
			Evidence: []Evidence{{"alarm bucket", a.MemberID.String() + " " + a.Alarm}},
			Why:      "A NOSPACE alarm makes the cluster refuse writes; CORRUPT means members disagree on data.",
			Remedy:   "After the cause is fixed (compact and defragment for NOSPACE; replace the corrupt member for CORRUPT), clear it with: etcdctl alarm disarm",
		})
	}
	if r.Membership != nil && r.Membership.V2CustomKeys > 0 {
		out = append(out, Finding{
			ID: IDV2CustomData, Severity: Warning, Subject: "v2 store",
			Summary:  fmt.Sprintf("The v2 store holds %d key(s) written through the v2 API", r.Membership.V2CustomKeys),
			Evidence: []Evidence{{"v2 keys under /1", fmt.Sprint(r.Membership.V2CustomKeys)}},
			Why:      "etcd v3.6 refuses to start while the v2 store holds custom data.",
			Remedy:   "Before upgrading to v3.6, migrate or delete the v2 keys on v3.5 and verify with: etcdutl check v2store",
		})
	}
	return out
}

func selfFindings(r *datadir.Report) []Finding {
	id := r.Identity
	if r.Membership == nil {
		return nil
	}
	ev := []Evidence{
		{"member ID (WAL metadata)", id.MemberID.String()}, {"cluster ID (WAL metadata)", id.ClusterID.String()},
		{"v2 members", memberIDs(r.Membership.V2)}, {"v3 members", memberIDs(r.Membership.V3)},
	}
	if id.RemovedMarked {
		return []Finding{{
			ID: IDMemberRemoved, Severity: Critical, Subject: id.MemberID.String(),
			Summary:  fmt.Sprintf("This data dir belongs to member %s, which its own membership marks as removed", id.MemberID),
			Evidence: append(ev, Evidence{"removed (v2 / v3)", idList(r.Membership.V2Removed) + " / " + idList(r.Membership.V3Removed)}),
			Why:      "etcd started on this dir exits with \"the member has been permanently removed from the cluster\"; a pod using it crash-loops (incident 1).",
			Remedy:   quarantineRemedy(r),
		}}
	}
	if !id.InMembership {
		return []Finding{{
			ID: IDMemberNotInCluster, Severity: Critical, Subject: id.MemberID.String(),
			Summary:  fmt.Sprintf("Member %s is not in the membership recorded in its own data dir", id.MemberID),
			Evidence: ev,
			Why:      "The data dir does not describe this member as part of its cluster: it is stale, copied from elsewhere, or from before the member was added.",
			Remedy:   quarantineRemedy(r),
		}}
	}
	return nil
}

func quarantineRemedy(r *datadir.Report) string {
	name := r.Identity.Name
	if name == "" {
		name = "NAME"
	}
	return fmt.Sprintf("Do not start a member on this data dir. Quarantine it (moved aside with checksums, never deleted; works on a volume's mount point) and rejoin the member fresh: etcdmedic guard --data-dir %s --name %s --peer-urls PEER_URL --endpoints LIVE_ENDPOINTS --fix --rejoin. By hand: move the contents aside, etcdctl member add %s --learner --peer-urls=PEER_URL, start with an empty data dir and --initial-cluster-state=existing, etcdctl member promote once caught up.",
		r.Path, name, name)
}

func driftFindings(r *datadir.Report) []Finding {
	if r.Membership == nil {
		return nil
	}
	byMember := map[etcdmedic.ID][]datadir.Drift{}
	var order []etcdmedic.ID
	for _, d := range r.Membership.Drifts() {
		if _, ok := byMember[d.MemberID]; !ok {
			order = append(order, d.MemberID)
		}
		byMember[d.MemberID] = append(byMember[d.MemberID], d)
	}
	var out []Finding
	for _, id := range order {
		drifts := byMember[id]
		sev := Warning
		var ev []Evidence
		var fields []string
		name := ""
		for _, d := range drifts {
			if d.Field == "isLearner" || d.Field == "presence" {
				sev = Critical
			}
			if d.Name != "" {
				name = d.Name
			}
			fields = append(fields, d.Field)
			v := fmt.Sprintf("v2 store=%s, v3 backend=%s", orDash(d.V2), orDash(d.V3))
			if d.Raft != "" {
				v += ", raft confState=" + d.Raft
			}
			ev = append(ev, Evidence{What: d.Field, Value: v})
		}
		subject := id.String()
		if name != "" {
			subject = name + " (" + id.String() + ")"
		}
		why := "The v3 backend disagrees with the v2 store on name or URLs. etcd v3.5.1-v3.5.19 never rewrote an existing member record (etcd #19557); v3.6 trusts the v3 copy."
		if sev == Critical {
			why = "etcd v3.6 reads membership from the v3 backend: a member recorded as a learner there (or missing, or present only there) makes v3.6 refuse to start (\"membership: too many learner members in cluster\") or act on a wrong membership. This is etcd #19557 (v3.5.1-v3.5.19), spread by raft snapshots in rolling replacements (#20793). etcd v3.5 serves `member list` from the v2 store, so nothing shows it online."
		}
		out = append(out, Finding{
			ID: IDMembershipDrift, Severity: sev, Subject: subject,
			Summary:  driftSummary(r, subject, fields),
			Evidence: ev,
			Why:      why,
			Remedy:   "Do not upgrade to v3.6 yet. Move every member to v3.5.24 or later (v3.5.20 at least) one at a time, then restart every member once so each republishes its own record; inspect a stopped member again (or run `etcdmedic upgrade check`) and upgrade only when no drift is left.",
		})
	}
	return out
}

func pdJoinFindings(r *datadir.Report) []Finding {
	j := r.PDJoin
	if j == nil || r.Membership == nil {
		return nil
	}
	known := map[string]bool{}
	for _, ms := range [][]etcdmedic.Member{r.Membership.V2, r.Membership.V3} {
		for _, m := range ms {
			if m.Name != "" {
				known["name:"+m.Name] = true
			}
			for _, u := range m.PeerURLs {
				known["url:"+u] = true
			}
		}
	}
	var out []Finding
	for _, jm := range j.Members {
		if known["name:"+jm.Name] || known["url:"+jm.PeerURL] {
			continue
		}
		out = append(out, Finding{
			ID: IDPDJoinUnknownMember, Severity: Critical, Subject: jm.Name,
			Summary: fmt.Sprintf("The PD join file names %s (%s), which this data dir's membership does not know", jm.Name, jm.PeerURL),
			Evidence: []Evidence{
				{"join file", j.Path}, {"join contents", j.Contents}, {"join file age", fmt.Sprintf("%ds (modified %s)", j.AgeSec, j.ModTime.Format("2006-01-02T15:04:05Z"))},
				{"membership names", memberNames(r.Membership)},
			},
			Why:    "PD trusts its join file at start and skips joining: a stale file makes it dial peers that no longer exist and crash-loop (incident 1).",
			Remedy: fmt.Sprintf("If this data dir is stale (other findings, or its cluster ID differs from the live cluster's), move both member/ and join aside, never delete: mv %s %s.stale. Otherwise move only the join file aside (mv %s %s.stale) and let PD rejoin.", r.Path, r.Path, j.Path, j.Path),
		})
	}
	return out
}

func memberIDs(ms []etcdmedic.Member) string {
	ids := make([]etcdmedic.ID, 0, len(ms))
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return idList(ids)
}

func idList(ids []etcdmedic.ID) string {
	if len(ids) == 0 {
		return "(none)"
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id.String()
	}
	return strings.Join(parts, ",")
}

func memberNames(ms *datadir.Membership) string {
	seen := map[string]bool{}
	var names []string
	for _, list := range [][]etcdmedic.Member{ms.V2, ms.V3} {
		for _, m := range list {
			if m.Name != "" && !seen[m.Name] {
				seen[m.Name] = true
				names = append(names, m.Name)
			}
		}
	}
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func driftSummary(r *datadir.Report, subject string, fields []string) string {
	if r.Membership.V2 == nil {
		return fmt.Sprintf("The v3 backend's record of member %s disagrees with raft's configuration (%s)", subject, strings.Join(fields, ", "))
	}
	return fmt.Sprintf("v2 and v3 membership disagree on member %s (%s)", subject, strings.Join(fields, ", "))
}
