package cluster

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic"
)

// View is the one picture of a cluster built from every probe.
type View struct {
	TakenAt   time.Time           `json:"takenAt"`
	ClusterID etcdmedic.ClusterID `json:"clusterID"`
	// Members is the membership (from the most up-to-date member list), each with what its
	// own endpoint answered.
	Members []MemberView `json:"members"`
	// Strangers answered but are not members of ClusterID: another cluster, or a removed
	// member still running on its old data.
	Strangers []*Probe `json:"strangers"`
	// Unmatched are endpoints that did not answer and belong to no known member.
	Unmatched []*Probe `json:"unmatched"`
	Quorum    Quorum   `json:"quorum"`
	// Leaders maps each leader ID some member reports to the names of the members saying so.
	Leaders map[etcdmedic.ID][]string `json:"leaders"`
	Probes  []*Probe                  `json:"probes"`
}

// MemberView is one member and its own endpoint's answer (nil when none answered).
type MemberView struct {
	etcdmedic.Member
	Probe *Probe `json:"probe,omitempty"`
	// State is what the probes prove about the member.
	State MemberState `json:"state"`
}

// MemberState is what the probes prove about a member: a probe that could not connect proves
// nothing, so such a member is neither up nor down.
type MemberState string

const (
	// StateUp: it is in the quorum: it answered, names a leader, and its linearizable read
	// succeeded (when the read was not asked, it names the leader most members name).
	StateUp MemberState = "up"
	// StateCutOff: it answers clients but is not in the quorum: it names no leader, or its
	// linearizable read failed (a member partitioned from its peers).
	StateCutOff MemberState = "cut off"
	// StateDown: proven not serving: every client URL probed refused the connection, or it
	// never started (no name or client URLs in the membership).
	StateDown MemberState = "down"
	// StateNotProbed: none of its client URLs was probed (doctor --no-discover).
	StateNotProbed MemberState = "not probed"
	// StateCouldNotProbe: its probe failed without proving it down (a timeout, a TLS error).
	StateCouldNotProbe MemberState = "could not probe"
)

// Up is true when the member's endpoint answered the Status RPC (in the quorum or cut off).
func (m MemberView) Up() bool { return m.Probe != nil && m.Probe.Reached }

// InQuorum is true when the member answered and takes part in the quorum (StateUp).
func (m MemberView) InQuorum() bool { return m.State == StateUp }

// Unknown is true when the probes prove neither that the member is up nor that it is down.
func (m MemberView) Unknown() bool {
	return m.State == StateNotProbed || m.State == StateCouldNotProbe
}

// Started is false for a member added to the membership whose process never joined: etcd
// only fills in name and client URLs when the member first publishes them.
func (m MemberView) Started() bool { return m.Name != "" && len(m.ClientURLs) > 0 }

// Quorum counts voters.
type Quorum struct {
	Voters int `json:"voters"`
	// VotersUp are the voters that answered, in the quorum or cut off from it.
	VotersUp int `json:"votersUp"`
	// InQuorum are the voters in the quorum (StateUp): a voter that answers clients but is cut
	// off from its peers does not count. Lost and Tolerance count these.
	InQuorum int `json:"votersInQuorum"`
	// CutOff voters answer clients but are not in the quorum.
	CutOff int `json:"cutOff"`
	// Unknown voters were not probed, or their probe failed without proving them down (a
	// timeout, a TLS error): counted neither up nor down.
	Unknown   int `json:"unknown"`
	Needed    int `json:"needed"`
	Tolerance int `json:"tolerance"` // more voters that may fail before quorum is lost (<0: lost), counting only voters in the quorum
	// Proven is true when some voter shows that a quorum exists: its linearizable read
	// succeeded, or it answered and names a leader.
	Proven bool `json:"proven"`
}

// Lost reports whether fewer voters are shown in the quorum than it needs: quorum lost, or not
// verified (voters Unknown or cut off). Whatever changes the cluster refuses then; ProvenLost
// tells lost apart.
func (q Quorum) Lost() bool { return q.InQuorum < q.Needed }

// ProvenLost reports whether the probes prove quorum lost: no voter shows one, and the voters
// that answered (electing, they know no leader yet) and those not verified are too few to
// make one.
func (q Quorum) ProvenLost() bool { return !q.Proven && q.VotersUp+q.Unknown < q.Needed }

// Observe probes every member the cluster names and builds its view: what most commands need
// before they decide anything.
func Observe(ctx context.Context, conn Conn) *View {
	return Diagnose(ctx, conn, ProbeOptions{Discover: true})
}

// Diagnose probes the cluster as opts say and builds its view.
func Diagnose(ctx context.Context, conn Conn, opts ProbeOptions) *View {
	probes := ProbeAll(ctx, conn, opts)
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	v := BuildView(probes, now())
	if opts.CheckHash {
		if rev := v.commonRevision(); rev > 0 {
			var reached []*Probe
			for _, m := range v.Members {
				if m.Up() {
					reached = append(reached, m.Probe)
				}
			}
			HashAll(ctx, conn, reached, rev)
		}
	}
	return v
}

// commonRevision is a revision every reached voter has: the lowest current revision.
func (v *View) commonRevision() int64 {
	var rev int64
	for _, m := range v.Members {
		if m.Up() && !m.IsLearner && (rev == 0 || m.Probe.Status.Revision < rev) {
			rev = m.Probe.Status.Revision
		}
	}
	return rev
}

// BuildView turns probes into one view.
func BuildView(probes []*Probe, at time.Time) *View {
	v := &View{TakenAt: at, Probes: probes, Members: []MemberView{}, Leaders: map[etcdmedic.ID][]string{}, Strangers: []*Probe{}, Unmatched: []*Probe{}}
	v.ClusterID = majorityClusterID(probes)
	best := authoritativeList(probes, v.ClusterID)
	byID := map[etcdmedic.ID]*Probe{}
	for _, p := range probes {
		if p.Reached && p.Status.ClusterID == v.ClusterID {
			if _, dup := byID[p.Status.MemberID]; !dup {
				byID[p.Status.MemberID] = p
			}
		}
	}
	members := map[etcdmedic.ID]bool{}
	if best != nil {
		for _, m := range best.Members {
			members[m.ID] = true
			mv := MemberView{Member: m, Probe: byID[m.ID]}
			if mv.Probe == nil {
				mv.Probe = probeForURLs(probes, m.ClientURLs)
			}
			v.Members = append(v.Members, mv)
		}
	}
	sort.Slice(v.Members, func(i, j int) bool {
		a, b := v.Members[i], v.Members[j]
		return a.Name < b.Name || (a.Name == b.Name && a.ID < b.ID)
	})
	for _, p := range probes {
		switch {
		case best == nil:
			// No member list at all (a learner is refused one): nobody can be called a stranger.
		case p.Reached && (p.Status.ClusterID != v.ClusterID || !members[p.Status.MemberID]):
			v.Strangers = append(v.Strangers, p)
		case !p.Reached && !v.claimed(p):
			v.Unmatched = append(v.Unmatched, p)
		}
	}
	for _, m := range v.Members {
		if m.Up() && m.Probe.Status.Leader != etcdmedic.NoID {
			v.Leaders[m.Probe.Status.Leader] = append(v.Leaders[m.Probe.Status.Leader], m.ShortLabel())
		}
	}
	leader := v.Leader()
	for i := range v.Members {
		m := &v.Members[i]
		m.State = memberState(*m, probes, leader)
		if m.IsLearner {
			continue
		}
		v.Quorum.Voters++
		switch {
		case m.State == StateUp:
			v.Quorum.VotersUp++
			v.Quorum.InQuorum++
		case m.State == StateCutOff:
			v.Quorum.VotersUp++
			v.Quorum.CutOff++
		case m.Unknown():
			v.Quorum.Unknown++
		}
		if m.Up() && (m.Probe.Healthy || m.Probe.Status.Leader != etcdmedic.NoID) {
			v.Quorum.Proven = true
		}
	}
	v.Quorum.Needed = v.Quorum.Voters/2 + 1
	v.Quorum.Tolerance = v.Quorum.InQuorum - v.Quorum.Needed
	return v
}

// authoritativeList picks whose member list the view uses: the list most reached members of
// the cluster hold (a member restarted on a stale copy, or forced into a cluster of its own,
// holds a different one), ties going to the member furthest along in raft.
func authoritativeList(probes []*Probe, clusterID etcdmedic.ClusterID) *Probe {
	votes := map[string]int{}
	for _, p := range probes {
		if p.Reached && p.Status.ClusterID == clusterID && len(p.Members) > 0 {
			votes[membershipKey(p.Members)]++
		}
	}
	var best *Probe
	for _, p := range probes {
		if !p.Reached || p.Status.ClusterID != clusterID || len(p.Members) == 0 {
			continue
		}
		if best == nil {
			best = p
			continue
		}
		vp, vb := votes[membershipKey(p.Members)], votes[membershipKey(best.Members)]
		if vp > vb || (vp == vb && p.Status.RaftIndex > best.Status.RaftIndex) {
			best = p
		}
	}
	return best
}

func membershipKey(ms []etcdmedic.Member) string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID.String()
	}
	sort.Strings(ids)
	return strings.Join(ids, ",")
}

// claimed reports whether an endpoint that did not answer is one of a member's client URLs
// (any of them, not only the one whose probe the member shows).
func (v *View) claimed(p *Probe) bool {
	for _, m := range v.Members {
		if m.Probe == p || m.ClientURLs.Reaches(p.Endpoint) {
			return true
		}
	}
	return false
}

// memberState is what the probes prove about m: down only when it never started or every
// probe of its client URLs was refused; a timeout or a TLS error proves nothing. A member that
// answers is in the quorum only as inQuorum says.
func memberState(m MemberView, probes []*Probe, leader etcdmedic.ID) MemberState {
	switch {
	case m.Up() && inQuorum(m.Probe, leader):
		return StateUp
	case m.Up():
		return StateCutOff
	case !m.Started():
		return StateDown
	}
	probed, refused := false, true
	for _, p := range probes {
		if !p.Reached && m.ClientURLs.Reaches(p.Endpoint) {
			probed = true
			refused = refused && p.Refused
		}
	}
	switch {
	case !probed:
		return StateNotProbed
	case refused:
		return StateDown
	}
	return StateCouldNotProbe
}

// inQuorum decides whether a member that answered takes part in the quorum: it names the
// leader most members name, or another leader and its linearizable read went through (right
// after an election statuses are a moment apart, and a read that succeeded went through a
// leader that heard from a quorum). A voter cut off from its peers names no leader once its
// election timeout passes (raft's pre-candidate forgets its leader). A failed read alone does
// not take a voter out: on a busy cluster, during a leader change, or refused for
// authentication, it times out or fails while the member is in the quorum (member-cut-off
// says so as a warning).
func inQuorum(p *Probe, leader etcdmedic.ID) bool {
	switch {
	case p.Status.Leader == etcdmedic.NoID:
		return false
	case p.Status.Leader == leader:
		return true
	}
	return p.Healthy && !p.Status.IsLearner
}

// probeForURLs finds the (failed) probe of one of a member's client URLs.
func probeForURLs(probes []*Probe, urls etcdmedic.URLs) *Probe {
	for _, p := range probes {
		if !p.Reached && urls.Reaches(p.Endpoint) {
			return p
		}
	}
	return nil
}

func majorityClusterID(probes []*Probe) etcdmedic.ClusterID {
	counts := map[etcdmedic.ClusterID]int{}
	var order []etcdmedic.ClusterID
	for _, p := range probes {
		if p.Reached {
			id := p.Status.ClusterID
			if counts[id] == 0 {
				order = append(order, id)
			}
			counts[id]++
		}
	}
	best, found := etcdmedic.NoID, false
	for _, id := range order { // ties go to the cluster of the first given endpoint
		if !found || counts[id] > counts[best] {
			found = true
			best = id
		}
	}
	return best
}

// Leader returns the leader most members agree on, or NoID.
func (v *View) Leader() etcdmedic.ID {
	best := etcdmedic.NoID
	for id, who := range v.Leaders {
		if best == etcdmedic.NoID || len(who) > len(v.Leaders[best]) || (len(who) == len(v.Leaders[best]) && id < best) {
			best = id
		}
	}
	return best
}

// MemberByID returns the member with that ID, or nil.
func (v *View) MemberByID(id etcdmedic.ID) *MemberView {
	return v.member(func(m MemberView) bool { return m.ID == id })
}

// ByName returns the member with that name, or nil.
func (v *View) ByName(name string) *MemberView {
	return v.member(func(m MemberView) bool { return name != "" && m.Name == name })
}

// Find returns the member an operator named, by name or by hex ID, or nil.
func (v *View) Find(nameOrID string) *MemberView {
	return v.member(func(m MemberView) bool { return m.Is(nameOrID) })
}

// ByPeerURLs returns the member that has one of urls as a peer URL, or nil: etcd matches a
// joining member to its record by peer URL, written exactly so.
func (v *View) ByPeerURLs(urls []string) *MemberView {
	return v.member(func(m MemberView) bool { return m.PeerURLs.Overlap(urls) })
}

// Label names a member of the view for an operator, by ID: its name and ID when the view
// knows it, the ID alone otherwise.
func (v *View) Label(id etcdmedic.ID) string {
	if m := v.MemberByID(id); m != nil {
		return m.Label()
	}
	return id.String()
}

func (v *View) member(match func(MemberView) bool) *MemberView {
	i := slices.IndexFunc(v.Members, match)
	if i < 0 {
		return nil
	}
	return &v.Members[i]
}
