// Package member changes membership the safe way: a new member joins as a learner, is
// started, is promoted only once it has caught up, and a failed member is replaced only when
// the cluster can afford it.
package member

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// Joiner adds one member to a cluster that has quorum.
type Joiner struct {
	Client *clientv3.Client
	// Runtime starts the new member; nil means the operator starts it (the steps are printed)
	// and Join stops after the add.
	Runtime runtime.Runtime
	// Out gets one line per step, before the step runs.
	Out io.Writer
	// CatchUp bounds the wait for the learner to catch up and be promoted.
	CatchUp time.Duration
}

// JoinSpec is the member to add.
type JoinSpec struct {
	Name       string
	PeerURLs   []string
	ClientURLs []string
	DataDir    string
	// WALDir is the new member's --wal-dir when its WAL lives apart from its data dir.
	WALDir     string
	ExtraFlags []string
}

// Joined says what Join did.
type Joined struct {
	MemberID etcdmedic.ID       `json:"memberID"`
	Start    runtime.MemberSpec `json:"start"`
	Promoted bool               `json:"promoted"`
	Steps    []string           `json:"steps"`
}

func (j *Joiner) step(out *Joined, format string, a ...any) {
	line := fmt.Sprintf(format, a...)
	out.Steps = append(out.Steps, line)
	if j.Out != nil {
		fmt.Fprintln(j.Out, "==> "+line)
	}
}

// Join adds spec as a learner (or finds it already added, when run again), starts it through
// the runtime, waits until it has caught up (writing a harmless key meanwhile: a learner on an
// idle cluster can stall forever), and promotes it.
func (j *Joiner) Join(ctx context.Context, spec JoinSpec) (*Joined, error) {
	out := &Joined{}
	list, err := j.Client.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("member list: %w", err)
	}
	var id uint64
	var members []*etcdserverpb.Member
	alreadyVoter, startedHere := false, false
	if m := findByPeerURLs(list.Members, spec.PeerURLs); m != nil {
		// Started on spec's data dir by an earlier run, interrupted before the promotion (or
		// before it could say so): its data dir is its own, and it is finished from there.
		startedHere = startedOnDataDir(list, m, spec)
		if !m.IsLearner && m.Name != "" && !startedHere {
			return nil, fmt.Errorf("member %s (%x) already has peer URLs %s and has started: nothing to join", m.Name, m.ID, strings.Join(spec.PeerURLs, ","))
		}
		// Added before (by an earlier run, or by a plain member add that was never started).
		alreadyVoter = !m.IsLearner
		if startedHere {
			j.step(out, "member %x with peer URLs %s was added and started on %s by an earlier run (learner: %v): going on from there, its data kept as it is", m.ID, strings.Join(spec.PeerURLs, ","), spec.DataDir, m.IsLearner)
		} else {
			j.step(out, "member %x with peer URLs %s was already added (learner: %v): going on from there", m.ID, strings.Join(spec.PeerURLs, ","), m.IsLearner)
		}
		id, members = m.ID, list.Members
	} else {
		j.step(out, "etcdctl member add %s --learner --peer-urls=%s", spec.Name, strings.Join(spec.PeerURLs, ","))
		resp, err := retryUnhealthy(ctx, func(ctx context.Context) (*clientv3.MemberAddResponse, error) {
			return j.Client.MemberAddAsLearner(ctx, spec.PeerURLs)
		})
		if err != nil {
			return nil, fmt.Errorf("member add: %w", err)
		}
		id, members = resp.Member.ID, resp.Members
	}
	out.MemberID = etcdmedic.ID(id)
	out.Start = runtime.MemberSpec{
		Name: spec.Name, DataDir: spec.DataDir, ClientURLs: spec.ClientURLs, PeerURLs: spec.PeerURLs,
		InitialCluster: initialCluster(members, id, spec.Name), ClusterState: "existing", ExtraFlags: spec.ExtraFlags,
	}
	if spec.WALDir != "" {
		out.Start.ExtraFlags = append([]string{"--wal-dir=" + spec.WALDir}, spec.ExtraFlags...)
	}
	// A second etcd on the data dir would fail on its locks, or worse: never start one.
	runs := startedHere && runsOn(spec)
	if j.Runtime == nil {
		switch {
		case runs:
			j.step(out, "%s runs already on %s: leave it running", spec.Name, spec.DataDir)
		case startedHere:
			j.step(out, "start the member on its data dir %s as it is (it holds the member's own data: do not empty it) with these flags: etcd %s", spec.DataDir, strings.Join(out.Start.Flags(), " "))
		default:
			j.step(out, "start the member with an empty data dir and these flags: etcd %s", strings.Join(out.Start.Flags(), " "))
		}
		if !alreadyVoter {
			j.step(out, "once it has caught up: etcdctl member promote %x (or etcdmedic member promote %s)", id, spec.Name)
		}
		return out, nil
	}
	if runs {
		j.step(out, "%s runs already on %s: not started again", spec.Name, spec.DataDir)
	} else {
		j.step(out, "start %s: etcd %s", spec.Name, strings.Join(out.Start.Flags(), " "))
		if err := j.Runtime.Start(ctx, out.Start); err != nil {
			return out, err
		}
	}
	if alreadyVoter {
		j.step(out, "wait until %s serves (it was added as a voter: no promotion)", spec.Name)
		if err := j.waitServing(ctx, spec.ClientURLs); err != nil {
			return out, err
		}
		return out, nil
	}
	j.step(out, "wait until %s has caught up, then etcdctl member promote %x", spec.Name, id)
	// Whether the process still runs can be seen only for a local process.
	localDir := ""
	if _, ok := j.Runtime.(local.Runtime); ok {
		localDir = spec.DataDir
	}
	if err := j.promoteWhenReady(ctx, id, localDir); err != nil {
		return out, err
	}
	out.Promoted = true
	return out, nil
}

const nudgeKey = "etcdmedic/join-nudge"

// retryDelay paces the retries of a promotion or a membership change etcd refuses for now: a
// short, steady pace, as each refused try is cheap and every second waited is a second of the
// repair (etcd accepts a promotion the moment the learner is in sync).
const retryDelay = 250 * time.Millisecond

// waitServing waits until the member answers Status on one of its client URLs and knows a leader.
func (j *Joiner) waitServing(ctx context.Context, clientURLs []string) error {
	timeout := j.CatchUp
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		for _, u := range clientURLs {
			sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := j.Client.Status(sctx, u)
			scancel()
			if err == nil && st.Leader != 0 {
				return nil
			}
		}
		nctx, ncancel := context.WithTimeout(ctx, 2*time.Second)
		j.Client.Put(nctx, nudgeKey, time.Now().UTC().Format(time.RFC3339Nano))
		ncancel()
		select {
		case <-ctx.Done():
			return fmt.Errorf("the member did not serve on %s within %s: check its log", strings.Join(clientURLs, ","), timeout)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// PromoteWhenReady promotes a learner once etcd accepts it (see promoteWhenReady).
func (j *Joiner) PromoteWhenReady(ctx context.Context, id uint64) error {
	return j.promoteWhenReady(ctx, id, "")
}

// promoteWhenReady retries the promotion (etcd refuses it until the learner is in sync),
// writing a harmless key between tries.
func (j *Joiner) promoteWhenReady(ctx context.Context, id uint64, dataDir string) error {
	timeout := j.CatchUp
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	var goneSince time.Time
	for {
		// A member whose process is gone will never catch up: say so now, not at the timeout.
		if dataDir != "" {
			if _, _, ok := local.FindProcess(dataDir); ok {
				goneSince = time.Time{}
			} else if goneSince.IsZero() {
				goneSince = time.Now()
			} else if time.Since(goneSince) > 5*time.Second {
				return fmt.Errorf("the new member's etcd is not running on %s (it exited; see %s)", dataDir, local.LogFile(dataDir))
			}
		}
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		_, lastErr = j.Client.MemberPromote(rctx, id)
		rcancel()
		if lastErr == nil {
			return nil
		}
		if alreadyPromoted(lastErr) { // an earlier try went through after its timeout
			return nil
		}
		if !retryable(lastErr) {
			return fmt.Errorf("promote %x: %w", id, lastErr)
		}
		nctx, ncancel := context.WithTimeout(ctx, 2*time.Second)
		j.Client.Put(nctx, nudgeKey, time.Now().UTC().Format(time.RFC3339Nano))
		ncancel()
		select {
		case <-ctx.Done():
			return fmt.Errorf("member %x did not catch up within %s (last answer: %v); it stays a learner: check its log, then etcdctl member promote %x", id, timeout, lastErr, id)
		case <-time.After(retryDelay):
		}
	}
}

func alreadyPromoted(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "can only promote a learner member") && !strings.Contains(msg, "in sync with leader")
}

// retryable errors are the ones etcd gives while a membership change is not yet allowed.
func retryable(err error) bool {
	msg := err.Error()
	for _, s := range []string{"unhealthy cluster", "can only promote a learner member which is in sync with leader", "too many requests", "leader changed", "context deadline exceeded", "no leader"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// errNotSupportedForLearner is etcd's refusal of a request a learner cannot serve, as the
// client returns it (the client package names no error value for it).
var errNotSupportedForLearner = rpctypes.Error(rpctypes.ErrGRPCNotSupportedForLearner)

// retryUnhealthy retries a membership change refused with "unhealthy cluster" (etcd waits
// until every voter has been connected for 5 s after a change) for up to 30 s.
func retryUnhealthy[T any](ctx context.Context, op func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := op(rctx)
		rcancel()
		// "unhealthy cluster": a voter connected less than 5 s ago. "not supported for learner":
		// the request reached a member promoted a moment ago that has not applied it yet.
		if err == nil || !(errors.Is(err, rpctypes.ErrUnhealthy) || errors.Is(err, errNotSupportedForLearner)) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, errors.Join(err, ctx.Err())
		case <-time.After(retryDelay):
		}
	}
}

// startedOnDataDir reports whether m, found by spec's peer URLs in list, was started on spec's
// data dir (see startedOn); a data dir that cannot be read is not taken as evidence.
func startedOnDataDir(list *clientv3.MemberListResponse, m *etcdserverpb.Member, spec JoinSpec) bool {
	id, err := dataDirIdentity(spec.DataDir, spec.WALDir)
	if err != nil || id == nil {
		return false
	}
	member := etcdmedic.Member{ID: etcdmedic.ID(m.ID), Name: m.Name, PeerURLs: m.PeerURLs, IsLearner: m.IsLearner}
	return startedOn(member, etcdmedic.ClusterID(list.Header.ClusterId), spec, id)
}

func findByPeerURLs(ms []*etcdserverpb.Member, urls []string) *etcdserverpb.Member {
	for _, m := range ms {
		for _, u := range m.PeerURLs {
			if slices.Contains(urls, u) {
				return m
			}
		}
	}
	return nil
}

// initialCluster is what a joining member passes as --initial-cluster: every member by name,
// the joining one (not yet named in the membership) by its new name.
func initialCluster(ms []*etcdserverpb.Member, joining uint64, name string) string {
	var parts []string
	for _, m := range ms {
		n := m.Name
		if m.ID == joining {
			n = name
		}
		// A member that never started has no name yet; etcd expects it anyway, as "=URL"
		// (what etcdctl member add prints), or it refuses with "member count is unequal".
		for _, u := range m.PeerURLs {
			parts = append(parts, n+"="+u)
		}
	}
	return strings.Join(parts, ",")
}
