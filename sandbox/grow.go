package sandbox

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// AddMember grows the running sandbox by one member, as etcd's runbook does: `member add`
// (as a learner when learner is set; Promote it once it has caught up), then the new member
// started with --initial-cluster-state existing on a fresh data dir.
func (sb *Sandbox) AddMember(ctx context.Context, learner bool) (*Member, error) {
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
	if err := retry(ctx, 30*time.Second, func(ctx context.Context) error {
		if learner {
			_, err := cli.MemberAddAsLearner(ctx, []string{m.PeerURL})
			return err
		}
		_, err := cli.MemberAdd(ctx, []string{m.PeerURL})
		return err
	}); err != nil {
		return nil, fmt.Errorf("member add %s: %w", name, err)
	}
	sb.Members = append(sb.Members, m)
	added := &sb.Members[len(sb.Members)-1]
	if err := sb.start(added, sb.initialCluster(), "existing"); err != nil {
		return nil, err
	}
	return added, sb.save()
}

// Promote makes the learner called name a voter, retrying while etcd says it has not caught
// up yet, for at most timeout.
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

// retry calls try, each call bounded to 2 s, until it succeeds or timeout has passed; it
// returns the last error.
func retry(ctx context.Context, timeout time.Duration, try func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), 2*time.Second)
		err := try(cctx)
		cancel()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond)
	}
}
