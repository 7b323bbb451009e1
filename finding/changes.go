package finding

import (
	"fmt"
	"sort"
	"strings"

	"github.com/etcdmedic/etcdmedic"
	"github.com/etcdmedic/etcdmedic/cluster"
)

// ChangeKind is what changed between two looks at a cluster.
type ChangeKind string

const (
	FindingRaised  ChangeKind = "finding-raised"
	FindingCleared ChangeKind = "finding-cleared"
	MemberJoined   ChangeKind = "member-joined"
	MemberChanged  ChangeKind = "member-changed"
	MemberLeft     ChangeKind = "member-left"
)

// Change is one difference between two looks: a finding that appeared or cleared, or a member
// that joined, left, went up or down or changed role.
type Change struct {
	Kind     ChangeKind `json:"kind"`
	Subject  string     `json:"subject"`            // the finding's ID, or the member
	Severity Severity   `json:"severity,omitempty"` // of a finding
	Summary  string     `json:"summary,omitempty"`  // of a finding
	From     string     `json:"from,omitempty"`     // a member's state before ("up, leader")
	To       string     `json:"to,omitempty"`       // and after
}

// String is the change as doctor --watch prints it.
func (c Change) String() string {
	switch c.Kind {
	case FindingRaised:
		return fmt.Sprintf("+ [%s] %s: %s", strings.ToUpper(string(c.Severity)), c.Subject, c.Summary)
	case FindingCleared:
		return fmt.Sprintf("- cleared %s: %s", c.Subject, c.Summary)
	case MemberJoined:
		return fmt.Sprintf("member %s joined the membership (%s)", c.Subject, c.To)
	case MemberLeft:
		return fmt.Sprintf("member %s left the membership", c.Subject)
	}
	return fmt.Sprintf("member %s: %s -> %s", c.Subject, c.From, c.To)
}

// Changes lists what differs from prev to cur: findings first, then members, tracked by ID and
// named by their label.
func Changes(prev, cur Judged) []Change {
	key := func(f Finding) string { return f.ID + " " + f.Subject }
	before, after := map[string]bool{}, map[string]bool{}
	for _, f := range prev.Findings {
		before[key(f)] = true
	}
	for _, f := range cur.Findings {
		after[key(f)] = true
	}
	var out []Change
	for _, f := range cur.Findings {
		if !before[key(f)] {
			out = append(out, Change{Kind: FindingRaised, Subject: f.ID, Severity: f.Severity, Summary: f.Summary})
		}
	}
	for _, f := range prev.Findings {
		if !after[key(f)] {
			out = append(out, Change{Kind: FindingCleared, Subject: f.ID, Severity: f.Severity, Summary: f.Summary})
		}
	}
	was, is := memberStates(prev.View), memberStates(cur.View)
	for _, id := range sortedIDs(is) {
		m, before := is[id], was[id]
		switch {
		case before.state == "":
			out = append(out, Change{Kind: MemberJoined, Subject: m.label, To: m.state})
		case before.state != m.state:
			out = append(out, Change{Kind: MemberChanged, Subject: m.label, From: before.state, To: m.state})
		}
	}
	for _, id := range sortedIDs(was) {
		if is[id].state == "" {
			out = append(out, Change{Kind: MemberLeft, Subject: was[id].label, From: was[id].state})
		}
	}
	return out
}

// memberLook is one member as one look saw it.
type memberLook struct{ label, state string }

// memberStates is each member's state with its role, by member ID: names repeat (etcd's
// "default"), and a replacement may keep the name of the member it replaced.
func memberStates(v *cluster.View) map[etcdmedic.ID]memberLook {
	s := map[etcdmedic.ID]memberLook{}
	if v == nil {
		return s
	}
	for _, m := range v.Members {
		st := "down"
		switch {
		case m.Unknown():
			st = string(m.State) // not probed, could not probe: neither up nor down
		case m.Up():
			st = "up"
			if m.IsLearner {
				st += ", learner"
			}
			if m.Probe.Status.Leader == m.ID {
				st += ", leader"
			}
		}
		s[m.ID] = memberLook{label: m.ShortLabel(), state: st}
	}
	return s
}

// sortedIDs orders members by label, then ID, so output is stable.
func sortedIDs(m map[etcdmedic.ID]memberLook) []etcdmedic.ID {
	ids := make([]etcdmedic.ID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := m[ids[i]], m[ids[j]]
		return a.label < b.label || (a.label == b.label && ids[i] < ids[j])
	})
	return ids
}
