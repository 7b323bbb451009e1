// Package upgrade decides whether a cluster can move to a target etcd version without failing
// on its membership data (incident 3), and what the cheapest safe path is. Every rule cites the
// etcd issue or document it encodes.
package upgrade

import (
	"fmt"

	"github.com/coreos/go-semver/semver"
)

// Version is an etcd release.
type Version = semver.Version

// ParseVersion accepts "3.5.19" and "v3.5.19".
func ParseVersion(s string) (*Version, error) {
	if len(s) > 0 && s[0] == 'v' {
		s = s[1:]
	}
	v, err := semver.NewVersion(s)
	if err != nil {
		return nil, fmt.Errorf("version %q: want a release such as v3.6.16", s)
	}
	return v, nil
}

func v(s string) Version { return *semver.New(s) }

// Thresholds from etcd's fixes and upgrade guides.
var (
	// learnerFlagFixed: from v3.5.20, member records are rewritten on every change, so a
	// restart of every member repairs stale learner flags (etcd #19557, fixed by #19563).
	learnerFlagFixed = v("3.5.20")
	// snapshotFlagFixed: from v3.5.24, a member that receives a raft snapshot also fixes the
	// learner flags in it; before, rolling replacements spread stale flags (#20793, #20797).
	snapshotFlagFixed = v("3.5.24")
	// zombieFixed: from v3.5.26, members present only in the v3 store are removed (#20967, #20995).
	zombieFixed = v("3.5.26")
	// minFor37: the upgrade guide asks for v3.6.11 or later before v3.7 (v3.7 no longer loads v2
	// snapshots, #21107, so membership must be repaired while still on v3.6).
	minFor37 = v("3.6.11")
	// memberUpdateFixed: MemberUpdate could promote a learner (#21694), fixed in 3.5.31 and 3.6.12.
	memberUpdateFixed35, memberUpdateFixed36 = v("3.5.31"), v("3.6.12")
)
