package kubeapi

import (
	"fmt"
	"strings"
)

// Server is one kube-apiserver beside one etcd member.
type Server struct {
	// Name is the member (node) it runs beside.
	Name string `json:"name"`
	// URL is where it serves: https://127.0.0.1:PORT.
	URL string `json:"url"`
	// Port is its secure port.
	Port int `json:"port"`
	// EtcdServers is its --etcd-servers: its local member's client URL, as kubeadm writes it.
	EtcdServers []string `json:"etcdServers"`
	// CertDir holds the self-signed serving certificate it generates at first start.
	CertDir string `json:"certDir"`
	LogFile string `json:"logFile"`
	PID     int    `json:"pid"`
}

// Args are the server's command-line flags (after the binary): kubeadm's shape on one host,
// with the credentials shared by every apiserver of the cluster. The endpoint reconciler is off:
// every apiserver here advertises 127.0.0.1, on its own port.
func (s Server) Args(c *Credentials) []string {
	return []string{
		"--etcd-servers=" + strings.Join(s.EtcdServers, ","),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", s.Port),
		"--cert-dir=" + s.CertDir,
		"--token-auth-file=" + c.TokenFile,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.ServiceAccountKey,
		"--service-account-signing-key-file=" + c.ServiceAccountKey,
		"--service-cluster-ip-range=10.96.0.0/12",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--allow-privileged=true",
	}
}

// FlagValue is the value of flag --name in args (either --name=v or --name v), or "".
func FlagValue(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
