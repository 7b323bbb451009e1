package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/api/v3/version"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// joinTimeout bounds each of AddMember's waits: for the cluster to decide its version, and
// for the new member to serve.
const joinTimeout = 30 * time.Second

// AddMember grows the running sandbox by one member, as etcd's runbook does: `member add`
// (as a learner when learner is set; Promote it once it has caught up), then the new member
// started with --initial-cluster-state existing on a fresh data dir. It returns once the new
// member serves; a new member that exits first fails it at once, with its log's last lines
// (the member stays in the sandbox and in etcd's membership: sandbox down removes both).
func (sb *Sandbox) AddMember(ctx context.Context, learner bool) (*Member, error) {
	// etcd v3.5 refuses to start a member that joins while its peers' cluster version is
	// still "not_decided" ("incompatible with current running cluster"), which a first
	// member decides only once it has led for a moment: later on a loaded machine.
	if err := sb.waitClusterVersion(ctx, joinTimeout); err != nil {
		return nil, err
	}
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
		if errors.Is(err, rpctypes.ErrPeerURLExist) && addedUnstarted(ctx, cli, m.PeerURL) {
			return nil // an earlier try went through after its 2 s
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
	return added, sb.waitServing(ctx, added, joinTimeout)
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
// up yet, for at most timeout. A learner whose etcd has exited never catches up: that fails
// it at once, with the learner's log's last lines.
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
				_, err := cli.MemberPromote(ctx, lm.ID)
				return err
			}
		}
		return fmt.Errorf("%s is not in the member list", name)
	})
}

// waitServing waits until m answers on its client URL, which a joining etcd does only once
// its peers have let it in.
func (sb *Sandbox) waitServing(ctx context.Context, m *Member, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	return retry(ctx, timeout, func(context.Context) error {
		if m.Exited() {
			return stop(m.exitedError("before it served"))
		}
		_, err := clusterVersionOf(hc, m.ClientURL)
		return err
	})
}

// waitClusterVersion waits until every running member serves a decided cluster version.
func (sb *Sandbox) waitClusterVersion(ctx context.Context, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	err := retry(ctx, timeout, func(context.Context) error {
		for _, m := range sb.Members {
			if !m.Running() {
				continue
			}
			if v, err := clusterVersionOf(hc, m.ClientURL); err != nil || v == "" || v == "not_decided" {
				return fmt.Errorf("%s: cluster version %q (%v)", m.Name, v, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("the cluster has not decided its version within %s (%v): a member joining now would be refused", timeout, err)
	}
	return nil
}

// clusterVersionOf is the cluster version a member serves on its /version endpoint.
func clusterVersionOf(hc *http.Client, clientURL string) (string, error) {
	resp, err := hc.Get(strings.TrimSuffix(clientURL, "/") + "/version")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("/version: %s", resp.Status)
	}
	var v version.Versions
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return "", fmt.Errorf("/version: %w", err)
	}
	return v.Cluster, nil
}

func (m *Member) exitedError(when string) error {
	return fmt.Errorf("member %s exited %s; the last lines of %s:\n%s", m.Name, when, m.LogFile, lastLines(m.LogFile, 20))
}

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
		time.Sleep(300 * time.Millisecond)
	}
}
