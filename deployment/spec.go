// Package deployment reads how a member is really run (a process's command line and
// environment, an etcd config file, a systemd unit, a kubeadm static pod, a TiDB PD config)
// into one member spec: its name, data dir, WAL dir, URLs and TLS files, and how it is stopped
// and started. It follows etcd's own rules: a config file replaces every flag and ETCD_*
// variable, a flag and its ETCD_* variable both set is refused (etcd will not start so), an
// empty variable is unset, and what neither sets takes etcd's default.
package deployment

import (
	"path/filepath"
	"strings"
)

// Spec is one member as its deployment configures it.
type Spec struct {
	// Server is the program: "etcd", or "pd-server" (TiDB PD embeds etcd; its data dir holds
	// etcd's member/ folder).
	Server  string `json:"server"`
	Name    string `json:"name"`
	DataDir string `json:"dataDir"`
	// WALDir is --wal-dir when the WAL lives apart from the data dir ("": <data-dir>/member/wal).
	WALDir         string   `json:"walDir,omitempty"`
	PeerURLs       []string `json:"peerURLs"`   // as advertised to the other members
	ClientURLs     []string `json:"clientURLs"` // as advertised to clients
	InitialCluster string   `json:"initialCluster,omitempty"`
	// InitialClusterState is "new" (etcd's default: on an empty data dir it bootstraps a
	// cluster) or "existing" (it joins one); "" when not known (PD).
	InitialClusterState string `json:"initialClusterState,omitempty"`
	ClientTLS           TLS    `json:"clientTLS,omitzero"`
	PeerTLS             TLS    `json:"peerTLS,omitzero"`
	// ConfigFile is the etcd (or PD) config file the settings were read from, if any.
	ConfigFile string `json:"configFile,omitempty"`
	// Origins says, for each setting, where it came from: a flag, an ETCD_* variable (and the
	// file that set it), a key of the config file, or etcd's default.
	Origins map[string]string `json:"origins"`
	// Runs is how the member is run, and so how it is stopped and started.
	Runs Runner `json:"runs"`
}

// TLS are the certificate files of one side (clients or peers).
type TLS struct {
	CertFile       string `json:"certFile,omitempty"`
	KeyFile        string `json:"keyFile,omitempty"`
	TrustedCAFile  string `json:"trustedCAFile,omitempty"`
	ClientCertAuth bool   `json:"clientCertAuth,omitempty"`
}

// Kind is what runs a member.
type Kind string

const (
	// Process is a process found running (or a command line given): stopped by signal.
	Process Kind = "process"
	// Systemd is a systemd unit: systemctl stop / start.
	Systemd Kind = "systemd"
	// StaticPod is a kubeadm static pod: its manifest moved out of kubelet's folder and back.
	StaticPod Kind = "static-pod"
	// ConfigOnly is a config file read on its own: how it is run is not known.
	ConfigOnly Kind = "config-file"
)

// Runner is how the member is run.
type Runner struct {
	Kind     Kind     `json:"kind"`
	PID      int      `json:"pid,omitempty"`
	Unit     string   `json:"unit,omitempty"`
	Manifest string   `json:"manifest,omitempty"`
	Command  []string `json:"command,omitempty"` // the program and its arguments
	// Env are the ETCD_* variables it runs with (NAME=value).
	Env []string `json:"env,omitempty"`
	// Stop and Start are the commands an operator runs for it ("" when not known).
	Stop  string `json:"stop,omitempty"`
	Start string `json:"start,omitempty"`
}

// WAL is the folder holding the member's WAL segments.
func (s Spec) WAL() string {
	if s.WALDir != "" {
		return s.WALDir
	}
	return filepath.Join(s.DataDir, "member", "wal")
}

// Snap is the folder holding the member's db and raft snapshots.
func (s Spec) Snap() string { return filepath.Join(s.DataDir, "member", "snap") }

// splitURLs reads a comma-separated URL list as etcd does.
func splitURLs(v string) []string {
	var out []string
	for _, u := range strings.Split(v, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// absUnder resolves p against dir (the member's working directory), as the process would.
func absUnder(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	if dir == "" {
		dir = "/"
	}
	return filepath.Join(dir, p)
}
