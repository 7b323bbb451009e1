// Package runtime is how etcdmedic stops, starts and reconfigures a member, whatever runs it:
// a local process (the sandbox, the tests), a kubeadm static pod, a systemd unit, or a printed runbook.
package runtime

import "context"

// MemberSpec is everything needed to start one member.
type MemberSpec struct {
	Name           string
	DataDir        string
	ClientURLs     []string
	PeerURLs       []string
	InitialCluster string // name=peerURL,...
	// ClusterState is "new" or "existing".
	ClusterState string
	// ExtraFlags are passed to etcd as they are (TLS files, quotas, ...).
	ExtraFlags []string
}

// Runtime starts and stops members.
type Runtime interface {
	// Start starts the member and returns once its process runs (not once it serves).
	Start(ctx context.Context, m MemberSpec) error
	// Stop stops the member gracefully, then forcibly after a grace period.
	Stop(ctx context.Context, m MemberSpec) error
}

// Flags are the etcd flags that start m.
func (m MemberSpec) Flags() []string {
	join := func(s []string) string {
		out := ""
		for i, u := range s {
			if i > 0 {
				out += ","
			}
			out += u
		}
		return out
	}
	flags := []string{
		"--name", m.Name,
		"--data-dir", m.DataDir,
		"--listen-client-urls", join(m.ClientURLs),
		"--advertise-client-urls", join(m.ClientURLs),
		"--listen-peer-urls", join(m.PeerURLs),
		"--initial-advertise-peer-urls", join(m.PeerURLs),
		"--initial-cluster", m.InitialCluster,
		"--initial-cluster-state", m.ClusterState,
	}
	return append(flags, m.ExtraFlags...)
}
