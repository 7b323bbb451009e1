package finding

import (
	"fmt"
	"sort"
	"strings"

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

// Changes lists what differs from prev to cur: findings first, then members by name.
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
	for _, name := range sortedKeys(is) {
		switch {
		case was[name] == "":
			out = append(out, Change{Kind: MemberJoined, Subject: name, To: is[name]})
		case was[name] != is[name]:
			out = append(out, Change{Kind: MemberChanged, Subject: name, From: was[name], To: is[name]})
		}
	}
	for _, name := range sortedKeys(was) {
		if is[name] == "" {
			out = append(out, Change{Kind: MemberLeft, Subject: name, From: was[name]})
		}
	}
	return out
}

// memberStates is each member's "up"/"down" with its role, by its short label.
func memberStates(v *cluster.View) map[string]string {
	s := map[string]string{}
	if v == nil {
		return s
	}
	for _, m := range v.Members {
		st := "down"
		if m.Up() {
			st = "up"
			if m.IsLearner {
				st += ", learner"
			}
			if m.Probe.Status.Leader == m.ID {
				st += ", leader"
			}
		}
		s[m.ShortLabel()] = st
	}
	return s
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
