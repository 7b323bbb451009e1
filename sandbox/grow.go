package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/cluster"
)

// joinTimeout bounds AddMember's wait for the cluster to decide its version and its member
// add; serveTimeout its wait for the new member to serve (a learner's first publish can take
// 7 s and more on a loaded machine).
const (
	joinTimeout  = 30 * time.Second
	serveTimeout = 2 * time.Minute
)

// AddMember grows the running sandbox by one member, as etcd's runbook does: `member add`
// (as a learner when learner is set; Promote it once it has caught up), then the new member
// started with --initial-cluster-state existing on a fresh data dir. It returns once the new
// member serves; a new member that exits first fails it at once, with its log's last lines
// (the member stays in the sandbox, which sandbox down stops, and in etcd's membership).
func (sb *Sandbox) AddMember(ctx context.Context, learner bool) (*Member, error) {
	// etcd v3.5 refuses to start a member that joins while its peers' cluster version is
	// still "not_decided" ("incompatible with current running cluster"), which a first
	// member decides only once it has led for a moment: later on a loaded machine.
	sb.waitClusterVersion(ctx, joinTimeout)
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("m%d", len(sb.Members)+1)
	m := Member{
		Name:      name,
		DataDir:   filepath.Join(sb.Dir, name+".etcd"),
		ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		LogFile:   filepath.Join(sb.Dir, name+".log"),
	}
	cli, err := sb.client()
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	if err := retry(ctx, joinTimeout, func(ctx context.Context) error {
		var err error
		if learner {
			_, err = cli.MemberAddAsLearner(ctx, []string{m.PeerURL})
		} else {
			_, err = cli.MemberAdd(ctx, []string{m.PeerURL})
		}
		if addedAlready(err) && addedUnstarted(ctx, cli, m.PeerURL) {
			return nil
		}
		return err
	}); err != nil {
		return nil, fmt.Errorf("member add %s: %w", name, err)
	}
	sb.Members = append(sb.Members, m)
	added := &sb.Members[len(sb.Members)-1]
	if err := sb.start(added, sb.initialCluster(), "existing"); err != nil {
		return nil, err
	}
	if err := sb.save(); err != nil {
		return nil, err
	}
	return added, sb.waitServing(ctx, cli, added, serveTimeout)
}

// addedAlready reports whether err is etcd refusing a learner add that an earlier try made
// already (one that went through after its 2 s): for its peer URL, or, within the same second,
// for the member ID, which etcd derives from the peer URLs and the second of the add. A voter
// add is refused by the quorum check first: that one is not retried into success.
func addedAlready(err error) bool {
	return errors.Is(err, rpctypes.ErrPeerURLExist) || errors.Is(err, rpctypes.ErrMemberExist)
}

// addedUnstarted reports whether the membership holds a member on peerURL that has not
// started yet (it has no name): the one an earlier member add made.
func addedUnstarted(ctx context.Context, cli *clientv3.Client, peerURL string) bool {
	list, err := cli.MemberList(ctx)
	if err != nil {
		return false
	}
	for _, lm := range list.Members {
		if lm.Name == "" && len(lm.PeerURLs) == 1 && lm.PeerURLs[0] == peerURL {
			return true
		}
	}
	return false
}

// Promote makes the learner called name a voter, retrying while etcd says it has not caught
// up yet, for at most timeout. It promotes only a running learner: one whose etcd has exited
// (or was stopped) fails it at once, with the learner's log's last lines.
func (sb *Sandbox) Promote(ctx context.Context, name string, timeout time.Duration) error {
	m, err := sb.Member(name)
	if err != nil {
		return err
	}
	// Through the other members only: a learner answers MemberPromote "rpc not supported for
	// learner", and the client would send it every third try.
	var voters []string
	for _, o := range sb.Members {
		if o.Name != name {
			voters = append(voters, o.ClientURL)
		}
	}
	cli, err := clientOf(voters)
	if err != nil {
		return err
	}
	defer cli.Close()
	return retry(ctx, timeout, func(ctx context.Context) error {
		if m.Exited() {
			return stop(m.exitedError("before it was promoted"))
		}
		list, err := cli.MemberList(ctx)
		if err != nil {
			return err
		}
		for _, lm := range list.Members {
			if len(lm.PeerURLs) == 1 && lm.PeerURLs[0] == m.PeerURL {
				if !lm.IsLearner {
					return nil // an earlier try went through after its 2 s
				}
				_, err := cli.MemberPromote(ctx, lm.ID)
				return err
			}
		}
		return fmt.Errorf("%s is not in the member list", name)
	})
}

// waitServing waits until m answers on its client URL, which a joining etcd does only once
// its peers have let it in and it has published itself. From its third second it writes a
// harmless key now and then through the other members: a new member of an idle cluster can
// wait for an entry to catch up on.
func (sb *Sandbox) waitServing(ctx context.Context, cli *clientv3.Client, m *Member, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	started, nudged, exited := time.Now(), time.Time{}, false
	err := retry(ctx, timeout, func(ctx context.Context) error {
		if exited = m.Exited(); exited {
			return stop(m.exitedError("before it served"))
		}
		_, err := cluster.ServedVersions(ctx, hc, m.ClientURL)
		if err != nil && time.Since(started) > 2*time.Second && time.Since(nudged) > time.Second {
			nudged = time.Now()
			cli.Put(ctx, nudgeKey, nudged.UTC().Format(time.RFC3339Nano))
		}
		return err
	})
	if err != nil && !exited {
		return fmt.Errorf("member %s does not serve on %s after %s (%v); the last lines of %s:\n%s", m.Name, m.ClientURL, timeout, err, m.LogFile, lastLines(m.LogFile, logTailLines))
	}
	return err
}

// nudgeKey is the harmless key waitServing writes.
const nudgeKey = "etcdmedic/sandbox/nudge"

// waitClusterVersion waits, at most timeout, until a running member serves a decided cluster
// version: what etcd v3.5 asks of a joining member's peers. After that it lets the add go on
// (the new member then says in its log why it cannot start, and AddMember shows it).
func (sb *Sandbox) waitClusterVersion(ctx context.Context, timeout time.Duration) {
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	retry(ctx, timeout, func(ctx context.Context) error {
		for _, m := range sb.Members {
			if v, err := cluster.ServedVersions(ctx, hc, m.ClientURL); err == nil && cluster.Decided(v) {
				return nil
			}
		}
		return errors.New("no member serves a decided cluster version")
	})
}

func (m *Member) exitedError(when string) error {
	return fmt.Errorf("member %s exited %s; the last lines of %s:\n%s", m.Name, when, m.LogFile, lastLines(m.LogFile, logTailLines))
}

// logTailLines is how much of a member's log an error about it shows: an etcd refusing a
// flag prints its usage (20 lines for v3.6) after the reason.
const logTailLines = 40

// stoppedError is an error retry gives back at once instead of trying again.
type stoppedError struct{ err error }

func (e stoppedError) Error() string { return e.err.Error() }
func (e stoppedError) Unwrap() error { return e.err }

func stop(err error) error { return stoppedError{err} }

// retry calls try, each call bounded to 2 s, until it succeeds, it returns an error made by
// stop, or timeout has passed; it returns the last error.
func retry(ctx context.Context, timeout time.Duration, try func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), 2*time.Second)
		err := try(cctx)
		cancel()
		var stopped stoppedError
		if errors.As(err, &stopped) {
			return stopped.err
		}
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(300 * time.Millisecond):
		}
	}
}
