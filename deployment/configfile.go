package deployment

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"sigs.k8s.io/yaml"
)

// etcdConfigFile is the part of etcd's YAML config file (--config-file) a spec is made of.
type etcdConfigFile struct {
	Name                     string        `json:"name"`
	DataDir                  string        `json:"data-dir"`
	WALDir                   string        `json:"wal-dir"`
	ListenClientURLs         string        `json:"listen-client-urls"`
	AdvertiseClientURLs      string        `json:"advertise-client-urls"`
	ListenPeerURLs           string        `json:"listen-peer-urls"`
	InitialAdvertisePeerURLs string        `json:"initial-advertise-peer-urls"`
	InitialCluster           string        `json:"initial-cluster"`
	ClientSecurity           *fileSecurity `json:"client-transport-security"`
	PeerSecurity             *fileSecurity `json:"peer-transport-security"`
}

type fileSecurity struct {
	CertFile       string `json:"cert-file"`
	KeyFile        string `json:"key-file"`
	TrustedCAFile  string `json:"trusted-ca-file"`
	ClientCertAuth bool   `json:"client-cert-auth"`
}

// FromConfigFile resolves a member from etcd's YAML config file alone, as etcd does when it is
// given one: no flag or ETCD_* variable counts then. Relative paths are resolved against the
// file's folder (etcd resolves them against its working directory, which distributions set to
// the data dir's parent; the review shows the result).
func FromConfigFile(path string) (Spec, error) { return fromConfigFile(path, "") }

// fromConfigFile reads the config file of a process whose working directory is dir ("": the
// file's folder).
func fromConfigFile(path, dir string) (Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("read etcd config file: %w", err)
	}
	var f etcdConfigFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		return Spec{}, fmt.Errorf("etcd config file %s is not YAML etcd can read: %w", path, err)
	}
	v := values{set: map[string]string{}, origin: map[string]string{}}
	put := func(key, value string) {
		if value != "" {
			v.set[key], v.origin[key] = value, "config file "+path+": "+key
		}
	}
	put("name", f.Name)
	put("data-dir", f.DataDir)
	put("wal-dir", f.WALDir)
	put("listen-client-urls", f.ListenClientURLs)
	put("advertise-client-urls", f.AdvertiseClientURLs)
	put("listen-peer-urls", f.ListenPeerURLs)
	put("initial-advertise-peer-urls", f.InitialAdvertisePeerURLs)
	put("initial-cluster", f.InitialCluster)
	if c := f.ClientSecurity; c != nil {
		put("cert-file", c.CertFile)
		put("key-file", c.KeyFile)
		put("trusted-ca-file", c.TrustedCAFile)
		put("client-cert-auth", strconv.FormatBool(c.ClientCertAuth))
	}
	if p := f.PeerSecurity; p != nil {
		put("peer-cert-file", p.CertFile)
		put("peer-key-file", p.KeyFile)
		put("peer-trusted-ca-file", p.TrustedCAFile)
		put("peer-client-cert-auth", strconv.FormatBool(p.ClientCertAuth))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Spec{}, err
	}
	if dir == "" {
		dir = filepath.Dir(abs)
	}
	s := v.etcdSpec(dir)
	s.ConfigFile = abs
	s.Runs = Runner{Kind: ConfigOnly, Command: []string{"etcd", "--config-file", abs}}
	return s, nil
}
