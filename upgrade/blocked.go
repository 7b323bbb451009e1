package upgrade

import (
	"errors"
	"fmt"
	"strings"

	"github.com/etcdmedic/etcdmedic/finding"
)

// ErrBlocked marks an upgrade plan refused, or an apply stopped before its first step, because
// the check holds a critical finding that the planned hops do not route around.
var ErrBlocked = errors.New("blocked")

// BlockedError lists the critical findings the hops do not route around, each with its remedy.
type BlockedError struct {
	Target   string
	Findings []finding.Finding
}

func (e *BlockedError) Error() string {
	var each []string
	for _, f := range e.Findings {
		each = append(each, fmt.Sprintf("[%s] %s: %s", f.ID, f.Summary, strings.TrimSuffix(f.Remedy, ".")))
	}
	return fmt.Sprintf("the upgrade check says BLOCKED for what the planned hops to %s do not route around: %s", e.Target, strings.Join(each, "; "))
}

func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// notRoutedAround returns the critical findings of a check that the hops from the version from
// do not take care of: the plan must not be made, nor applied. A critical finding is routed
// around only when it is named here with the hop that handles it; any other (one added to the
// check later, too) blocks.
func notRoutedAround(findings []finding.Finding, from *Version, hops []Hop) []finding.Finding {
	var out []finding.Finding
	for _, f := range findings {
		if f.Severity == finding.Critical && !routedAround(f.ID, from, hops) {
			out = append(out, f)
		}
	}
	return out
}

// routedAround is the allow-list: the critical findings a hop of the plan exists for.
func routedAround(id string, from *Version, hops []Hop) bool {
	switch id {
	case IDTooOld, IDMembershipDrift, IDMembershipUnknown:
		// The full restart on v3.5.24+ makes every member republish its own record, in every
		// store; the check after it fetches every voter's db and stops before v3.6 on drift.
		return restartsOn(from, hops, snapshotFlagFixed)
	case IDZombieMembers:
		// Only v3.5.26+ removes members present in the v3 store alone (#20995).
		return restartsOn(from, hops, zombieFixed)
	case IDDowngrade:
		// The downgrade step lowers the storage version before any binary is swapped.
		return len(hops) == 1 && downgrades(from, hops[0])
	case IDSkipsMinor:
		return throughEveryMinor(from, hops)
	}
	return false
}

// restartsOn reports whether a hop restarts every member on a v3.5 at least min that they run
// already (the hop before it, or the plan's start, is that version): the restart that repairs
// membership records.
func restartsOn(from *Version, hops []Hop, min Version) bool {
	prev := from
	for _, h := range hops {
		v, err := ParseVersion(h.Version)
		if err != nil {
			return false
		}
		if v.Major == 3 && v.Minor == 5 && !v.LessThan(min) && prev.Equal(*v) {
			return true
		}
		prev = v
	}
	return false
}

// downgrades reports whether hop goes one minor version down from from.
func downgrades(from *Version, hop Hop) bool {
	v, err := ParseVersion(hop.Version)
	return err == nil && v.Major == from.Major && v.Minor+1 == from.Minor
}

// throughEveryMinor reports whether the hops go one minor version at a time, each intermediate
// one at least what the next asks for (v3.6.11 before v3.7, minFor37).
func throughEveryMinor(from *Version, hops []Hop) bool {
	prev := *from
	for _, h := range hops {
		v, err := ParseVersion(h.Version)
		if err != nil || v.Major != prev.Major || v.Minor > prev.Minor+1 {
			return false
		}
		if v.Minor == 7 && prev.Minor == 6 && prev.LessThan(minFor37) {
			return false
		}
		prev = *v
	}
	return true
}

// blocked is the plan's refusal (nil: its recorded check holds nothing the hops do not route
// around). A plan without a recorded check is refused: it was not made by upgrade plan.
func (p *Plan) blocked() error {
	if p.Check == nil {
		return fmt.Errorf("the plan records no upgrade check (%w): make it again with etcdmedic upgrade plan", ErrBlocked)
	}
	from, err := ParseVersion(p.From)
	if err != nil {
		return fmt.Errorf("the plan's starting version: %w", err)
	}
	if fs := notRoutedAround(p.Check.Findings, from, p.Hops); len(fs) > 0 {
		return &BlockedError{Target: p.Target, Findings: fs}
	}
	return nil
}
