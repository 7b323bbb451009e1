// Package finding holds what etcdmedic concludes: each Finding names what is wrong, shows the
// evidence it saw, says why it matters and gives the exact next step.
package finding

import "sort"

// Severity orders findings by urgency.
type Severity string

const (
	Info     Severity = "info"
	Warning  Severity = "warning"
	Critical Severity = "critical"
)

func (s Severity) rank() int {
	switch s {
	case Critical:
		return 2
	case Warning:
		return 1
	}
	return 0
}

// Evidence is one observed fact behind a finding: where it was seen and what it was.
type Evidence struct {
	What  string `json:"what"`
	Value string `json:"value"`
}

// Finding is one conclusion. ID is stable across releases so that scripts can match on it.
type Finding struct {
	ID       string     `json:"id"`
	Severity Severity   `json:"severity"`
	Subject  string     `json:"subject,omitempty"` // the member or file it is about
	Summary  string     `json:"summary"`
	Evidence []Evidence `json:"evidence"`
	Why      string     `json:"why"`
	Remedy   string     `json:"remedy"`
}

// Sort orders findings most urgent first, then by ID and subject, so output is stable.
func Sort(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		if a, b := fs[i].Severity.rank(), fs[j].Severity.rank(); a != b {
			return a > b
		}
		if fs[i].ID != fs[j].ID {
			return fs[i].ID < fs[j].ID
		}
		return fs[i].Subject < fs[j].Subject
	})
}

// Worst returns the highest severity among findings ("" when there are none).
func Worst(fs []Finding) Severity {
	var worst Severity
	for _, f := range fs {
		if worst == "" || f.Severity.rank() > worst.rank() {
			worst = f.Severity
		}
	}
	return worst
}
