package deployment

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/BurntSushi/toml"
)

// pdConfigFile is the part of TiDB PD's TOML config (pd-server --config) a spec is made of.
// PD embeds etcd: its data-dir holds etcd's member/ folder.
type pdConfigFile struct {
	Name                string `toml:"name"`
	DataDir             string `toml:"data-dir"`
	ClientURLs          string `toml:"client-urls"`
	PeerURLs            string `toml:"peer-urls"`
	AdvertiseClientURLs string `toml:"advertise-client-urls"`
	AdvertisePeerURLs   string `toml:"advertise-peer-urls"`
	InitialCluster      string `toml:"initial-cluster"`
	Join                string `toml:"join"`
	Security            struct {
		CAPath   string `toml:"cacert-path"`
		CertPath string `toml:"cert-path"`
		KeyPath  string `toml:"key-path"`
	} `toml:"security"`
}

// PD's defaults (pd/server/config): name "pd", data dir "default.<name>", and the advertised
// URLs default to the listened ones.
var pdDefaults = map[string]string{
	"name":        "pd",
	"client-urls": "http://127.0.0.1:2379",
	"peer-urls":   "http://127.0.0.1:2380",
}

// FromPDConfig resolves a PD member from its TOML config file alone (relative paths against
// the file's folder).
func FromPDConfig(path string) (Spec, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Spec{}, err
	}
	return fromPD(map[string]string{"config": abs}, filepath.Dir(abs), Runner{Kind: ConfigOnly, Command: []string{"pd-server", "--config", abs}})
}

// fromPD resolves pd-server's settings: its flags override its config file (PD's rule).
func fromPD(flags map[string]string, dir string, runner Runner) (Spec, error) {
	v := values{set: map[string]string{}, origin: map[string]string{}}
	var configFile string
	if path := flags["config"]; path != "" {
		configFile = absUnder(dir, path)
		var f pdConfigFile
		b, err := os.ReadFile(configFile)
		if err != nil {
			return Spec{}, fmt.Errorf("read PD config file: %w", err)
		}
		if err := toml.Unmarshal(b, &f); err != nil {
			return Spec{}, fmt.Errorf("PD config file %s is not TOML PD can read: %w", configFile, err)
		}
		for key, value := range map[string]string{"name": f.Name, "data-dir": f.DataDir, "client-urls": f.ClientURLs, "peer-urls": f.PeerURLs,
			"advertise-client-urls": f.AdvertiseClientURLs, "advertise-peer-urls": f.AdvertisePeerURLs, "initial-cluster": f.InitialCluster, "join": f.Join,
			"cacert": f.Security.CAPath, "cert": f.Security.CertPath, "key": f.Security.KeyPath} {
			if value != "" {
				v.set[key], v.origin[key] = value, "config file "+configFile+": "+key
			}
		}
	}
	for _, key := range []string{"name", "data-dir", "client-urls", "peer-urls", "advertise-client-urls", "advertise-peer-urls", "initial-cluster", "join", "cacert", "cert", "key"} {
		if value, ok := flags[key]; ok {
			v.set[key], v.origin[key] = value, "flag --"+key
		}
	}
	for key, def := range pdDefaults {
		if _, ok := v.set[key]; !ok {
			v.set[key], v.origin[key] = def, "default"
		}
	}
	s := Spec{Server: "pd-server", Name: v.set["name"], ConfigFile: configFile, Origins: v.origin, Runs: runner}
	s.DataDir = v.set["data-dir"]
	if s.DataDir == "" {
		s.DataDir, v.origin["data-dir"] = "default."+s.Name, "default (default.<name>)"
	}
	s.DataDir = absUnder(dir, s.DataDir)
	s.PeerURLs = splitURLs(firstSet(v.set["advertise-peer-urls"], v.set["peer-urls"]))
	s.ClientURLs = splitURLs(firstSet(v.set["advertise-client-urls"], v.set["client-urls"]))
	s.InitialCluster = v.set["initial-cluster"]
	// PD joins a running cluster with --join; without it, it bootstraps one from its
	// --initial-cluster, as etcd does with --initial-cluster-state=new.
	s.InitialClusterState = "new"
	if v.set["join"] != "" {
		s.InitialClusterState = "existing"
	}
	tls := TLS{CertFile: absUnder(dir, v.set["cert"]), KeyFile: absUnder(dir, v.set["key"]), TrustedCAFile: absUnder(dir, v.set["cacert"])}
	s.ClientTLS, s.PeerTLS = tls, tls // PD uses one set of files for both
	return s, nil
}

func firstSet(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
