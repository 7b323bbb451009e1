package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/etcdmedic/etcdmedic/deployment"
)

// DefaultKubeadmManifest is where kubeadm writes the etcd static pod.
const DefaultKubeadmManifest = "/etc/kubernetes/manifests/etcd.yaml"

// EtcdFlags returns the --flag=value pairs of the etcd container in a static pod manifest.
func EtcdFlags(manifestPath string) (map[string]string, error) {
	b, err := os.ReadFile(manifestPath)
	if err != nil {
		return nil, fmt.Errorf("read kubeadm manifest: %w", err)
	}
	flags, err := EtcdFlagsFromManifest(b)
	if err != nil {
		return nil, fmt.Errorf("kubeadm manifest %s: %w", manifestPath, err)
	}
	return flags, nil
}

// EtcdFlagsFromManifest returns a manifest's etcd settings by etcd's rules (a bare --flag
// counts as "true"; see deployment.ManifestFlags).
func EtcdFlagsFromManifest(b []byte) (map[string]string, error) { return deployment.ManifestFlags(b) }

// ConnFromKubeadm finds endpoints and certificates in the etcd static pod manifest the way an
// operator would: the local client URL, kubeadm's CA, and the healthcheck client certificate
// kubeadm makes for this purpose (or the server certificate, which kubeadm also signs for
// client auth).
func ConnFromKubeadm(manifestPath string, base Conn) (Conn, error) {
	flags, err := EtcdFlags(manifestPath)
	if err != nil {
		return base, err
	}
	var endpoints []string
	for _, u := range splitList(flags["listen-client-urls"]) {
		if strings.Contains(u, "127.0.0.1") || strings.Contains(u, "localhost") {
			endpoints = append(endpoints, u)
		}
	}
	if len(endpoints) == 0 {
		endpoints = splitList(flags["advertise-client-urls"])
	}
	if len(endpoints) == 0 {
		return base, fmt.Errorf("kubeadm manifest %s: etcd has neither --listen-client-urls nor --advertise-client-urls", manifestPath)
	}
	c := base
	c.Endpoints = endpoints
	c.CACert = flags["trusted-ca-file"]
	c.Cert, c.Key = flags["cert-file"], flags["key-file"]
	if c.CACert != "" {
		dir := filepath.Dir(c.CACert)
		hc, hk := filepath.Join(dir, "healthcheck-client.crt"), filepath.Join(dir, "healthcheck-client.key")
		if fileExists(hc) && fileExists(hk) {
			c.Cert, c.Key = hc, hk
		}
	}
	return c, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
