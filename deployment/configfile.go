package deployment

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"go.etcd.io/etcd/server/v3/embed"
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
	InitialClusterState      string        `json:"initial-cluster-state"`
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
// the data dir's parent; the review shows the result). A file that is not etcd's config (a
// Kubernetes manifest, YAML setting none of etcd's keys) is refused: read as one it would name
// etcd's defaults, a data dir the member does not use.
func FromConfigFile(path string) (Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("read etcd config file: %w", err)
	}
	if err := isEtcdConfig(path, b); err != nil {
		return Spec{}, err
	}
	return fromConfigFile(path, "")
}

// isEtcdConfig refuses YAML that is not an etcd config file, saying what it is.
func isEtcdConfig(path string, b []byte) error {
	var keys map[string]any
	if err := yaml.Unmarshal(b, &keys); err != nil {
		return fmt.Errorf("etcd config file %s is not YAML etcd can read: %w", path, err)
	}
	if kind, _ := keys["kind"].(string); kind != "" || keys["apiVersion"] != nil {
		hint := "give the etcd config file the member's --config-file names, or its data dir"
		if kind == "Pod" {
			hint = "give --kubeadm-manifest NAME=" + path + " (recover plan), or the member's data dir"
			if s, err := FromStaticPod(path); err == nil {
				hint = fmt.Sprintf("its etcd runs on %s (%s): give that data dir, or --kubeadm-manifest NAME=%s (recover plan)", s.DataDir, s.Origins["data-dir"], path)
			}
		}
		return fmt.Errorf("%s is a Kubernetes manifest (kind: %s), not an etcd config file: read as one it would name etcd's defaults (data dir %s); %s",
			path, kind, filepath.Join(filepath.Dir(path), "default.etcd"), hint)
	}
	for key := range keys {
		if etcdConfigKeys[key] {
			return nil
		}
	}
	return fmt.Errorf("%s sets none of etcd's config file keys (name, data-dir, listen-client-urls, ...): it is not an etcd config file (etcd given it would run on its defaults, data dir %s); give the file the member's --config-file names, or its data dir",
		path, filepath.Join(filepath.Dir(path), "default.etcd"))
}

// etcdConfigKeys are the keys of etcd's config file: embed.Config's, and the ones etcd
// translates (embed's configJSON).
var etcdConfigKeys = func() map[string]bool {
	keys := map[string]bool{}
	t := reflect.TypeOf(embed.Config{})
	for i := 0; i < t.NumField(); i++ {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			keys[name] = true
		}
	}
	for _, name := range []string{"listen-peer-urls", "listen-client-urls", "listen-client-http-urls", "initial-advertise-peer-urls",
		"advertise-client-urls", "cors", "host-whitelist", "client-transport-security", "peer-transport-security", "feature-gates"} {
		keys[name] = true
	}
	return keys
}()

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
	put("initial-cluster-state", f.InitialClusterState)
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
