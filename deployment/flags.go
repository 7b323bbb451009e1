package deployment

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// Environment is what a member's process is started with besides its arguments: its
// variables, where each came from (a unit's Environment= line, an EnvironmentFile), and its
// working directory (relative paths are resolved against it).
type Environment struct {
	Vars map[string]string
	From map[string]string // variable name -> where it was set ("" : the process's environment)
	Dir  string
}

// EnvironmentOf reads NAME=value pairs (as /proc/PID/environ or os.Environ give them).
func EnvironmentOf(pairs []string, dir string) Environment {
	e := Environment{Vars: map[string]string{}, From: map[string]string{}, Dir: dir}
	for _, kv := range pairs {
		if name, value, ok := strings.Cut(kv, "="); ok && name != "" {
			e.Vars[name] = value
		}
	}
	return e
}

// etcd's own defaults for what the spec holds (etcd v3.5 to v3.7).
var etcdDefaults = map[string]string{
	"name":                        "default",
	"listen-client-urls":          "http://localhost:2379",
	"advertise-client-urls":       "http://localhost:2379",
	"listen-peer-urls":            "http://localhost:2380",
	"initial-advertise-peer-urls": "http://localhost:2380",
	"initial-cluster-state":       "new",
}

// etcdKeys are the flags (and config file keys) a spec is made of.
var etcdKeys = []string{"name", "data-dir", "wal-dir", "listen-client-urls", "advertise-client-urls", "listen-peer-urls",
	"initial-advertise-peer-urls", "initial-cluster", "initial-cluster-state", "cert-file", "key-file", "trusted-ca-file", "client-cert-auth",
	"peer-cert-file", "peer-key-file", "peer-trusted-ca-file", "peer-client-cert-auth"}

// FromCommand resolves a member from the command line it runs with (argv[0] is the program:
// etcd, pd-server, or "etcdmedic etcd") and its environment, by etcd's rules.
func FromCommand(argv []string, env Environment) (Spec, error) {
	if len(argv) == 0 {
		return Spec{}, fmt.Errorf("no command line")
	}
	args, program := argv[1:], filepath.Base(argv[0])
	switch {
	case len(args) > 0 && args[0] == "etcd":
		args = args[1:] // "etcdmedic etcd": the etcd linked into etcdmedic (etcd takes no word)
	case !strings.HasPrefix(program, "etcd") && program != "pd-server":
		return Spec{}, fmt.Errorf("%s is not etcd (or pd-server): give the etcd process, or its configuration", strings.Join(argv, " "))
	}
	bools := etcdBoolFlags
	if program == "pd-server" {
		bools = nil // PD's own flags (its --config takes a path)
	}
	flags, err := parseFlags(args, bools)
	if err != nil {
		return Spec{}, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	runner := Runner{Kind: Process, Command: argv, Env: etcdVars(env)}
	if filepath.Base(argv[0]) == "pd-server" {
		return fromPD(flags, env.Dir, runner)
	}
	path, origin := lookup(flags, env, "config-file")
	if path == "" && env.Vars[envVar("config-file")] != "" {
		// An empty --config-file= leaves etcd reading ETCD_CONFIG_FILE.
		delete(flags, "config-file")
		path, origin = lookup(flags, env, "config-file")
	}
	if path != "" {
		// etcd reads only the file then: every other flag and ETCD_* variable is ignored.
		s, err := fromConfigFile(absUnder(env.Dir, path), env.Dir)
		if err != nil {
			return Spec{}, err
		}
		s.Origins["config-file"] = origin
		s.Runs = runner
		return s, nil
	}
	if err := conflicts(flags, env); err != nil {
		return Spec{}, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	v := values{set: map[string]string{}, origin: map[string]string{}}
	for _, key := range etcdKeys {
		if value, origin := lookup(flags, env, key); origin != "" {
			v.set[key], v.origin[key] = value, origin
		}
	}
	s := v.etcdSpec(env.Dir)
	s.Runs = runner
	return s, nil
}

// lookup finds a setting as etcd does: the flag, else its ETCD_* variable. An empty variable
// counts as unset (etcd's setFlagFromEnv skips it): templated env files hold ETCD_NAME= lines.
func lookup(flags map[string]string, env Environment, key string) (value, origin string) {
	if value, ok := flags[key]; ok {
		return value, "flag --" + key
	}
	name := envVar(key)
	if value := env.Vars[name]; value != "" {
		if from := env.From[name]; from != "" {
			return value, name + " (" + from + ")"
		}
		return value, name
	}
	return "", ""
}

// conflicts refuses what etcd refuses without a config file: a flag given on the command line
// while its ETCD_* variable is in the environment, even empty (pkg/flags verifyEnv is fatal:
// "conflicting environment variable is shadowed by corresponding command-line flag").
func conflicts(flags map[string]string, env Environment) error {
	var both []string
	for name := range flags {
		if _, ok := env.Vars[envVar(name)]; ok {
			both = append(both, name)
		}
	}
	if len(both) == 0 {
		return nil
	}
	sort.Strings(both)
	name := envVar(both[0])
	from := name
	if env.From[name] != "" {
		from += " (" + env.From[name] + ")"
	}
	return fmt.Errorf("--%s is set both as a flag and as %s: etcd refuses to start so (\"conflicting environment variable is shadowed by corresponding command-line flag\"); remove one of them", both[0], from)
}

// envVar names a flag's ETCD_* variable, as etcd's flags.FlagToEnv does.
func envVar(key string) string {
	return "ETCD_" + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
}

// values are a member's settings by flag name, each with where it came from.
type values struct {
	set    map[string]string
	origin map[string]string
}

// get returns the setting, or etcd's default (origin "default").
func (v values) get(key string) string {
	if value, ok := v.set[key]; ok {
		return value
	}
	if def, ok := etcdDefaults[key]; ok {
		v.set[key], v.origin[key] = def, "default"
		return def
	}
	return ""
}

// etcdSpec turns etcd's settings into a spec; relative paths are under dir.
func (v values) etcdSpec(dir string) Spec {
	s := Spec{Server: "etcd", Name: v.get("name"), Origins: v.origin}
	s.DataDir = v.get("data-dir")
	if s.DataDir == "" {
		s.DataDir, v.origin["data-dir"] = s.Name+".etcd", "default (<name>.etcd)"
	}
	s.DataDir, s.WALDir = absUnder(dir, s.DataDir), absUnder(dir, v.get("wal-dir"))
	s.PeerURLs = splitURLs(v.get("initial-advertise-peer-urls"))
	// etcd refuses to start with listen-client-urls set and advertise-client-urls not: the
	// advertised ones are always what clients are given.
	s.ClientURLs = splitURLs(v.get("advertise-client-urls"))
	s.InitialCluster = v.get("initial-cluster")
	s.InitialClusterState = v.get("initial-cluster-state")
	s.ClientTLS = TLS{CertFile: absUnder(dir, v.get("cert-file")), KeyFile: absUnder(dir, v.get("key-file")),
		TrustedCAFile: absUnder(dir, v.get("trusted-ca-file")), ClientCertAuth: isTrue(v.get("client-cert-auth"))}
	s.PeerTLS = TLS{CertFile: absUnder(dir, v.get("peer-cert-file")), KeyFile: absUnder(dir, v.get("peer-key-file")),
		TrustedCAFile: absUnder(dir, v.get("peer-trusted-ca-file")), ClientCertAuth: isTrue(v.get("peer-client-cert-auth"))}
	return s
}

func isTrue(v string) bool {
	return v == "true" || v == "1" || v == "t" || v == "T" || v == "TRUE" || v == "True"
}

// etcdBoolFlags are etcd's boolean flags (v3.5 to v3.7, etcdmain/config.go and
// embed/config.go, and the ignored ones): Go's flag package never takes the word after one as
// its value, so `--client-cert-auth true` leaves "true" as an argument etcd refuses.
var etcdBoolFlags = map[string]bool{"auto-tls": true, "client-cert-auth": true, "discovery-insecure-skip-tls-verify": true,
	"discovery-insecure-transport": true, "enable-distributed-tracing": true, "enable-grpc-gateway": true, "enable-log-rotation": true,
	"enable-pprof": true, "enable-v2": true, "experimental-compact-hash-check-enabled": true, "experimental-enable-distributed-tracing": true,
	"experimental-enable-lease-checkpoint": true, "experimental-enable-lease-checkpoint-persist": true, "experimental-initial-corrupt-check": true,
	"experimental-memory-mlock": true, "experimental-peer-skip-client-san-verification": true, "experimental-stop-grpc-service-on-defrag": true,
	"experimental-txn-mode-write-with-shared-buffer": true, "force-new-cluster": true, "initial-election-tick-advance": true, "memory-mlock": true,
	"peer-auto-tls": true, "peer-client-cert-auth": true, "peer-skip-client-san-verification": true, "pre-vote": true,
	"socket-reuse-address": true, "socket-reuse-port": true, "strict-reconfig-check": true, "unsafe-no-fsync": true, "version": true,
	"cluster-active-size": true, "cluster-remove-delay": true, "cluster-sync-interval": true, "config": true, "force": true,
	"max-result-buffer": true, "max-retry-attempts": true, "peer-heartbeat-interval": true, "peer-election-timeout": true,
	"retry-interval": true, "snapshot": true, "v": true, "vv": true}

// parseFlags reads Go-style flags as etcd's flag set does: -f or --f, with =value or the next
// word as the value; the boolean flags in bools take no next word. Another flag unknown to take no
// value, followed by a flag (or nothing), is a boolean set to true. etcd takes no positional
// arguments, so any other word is an error.
func parseFlags(args []string, bools map[string]bool) (map[string]string, error) {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if i+1 < len(args) {
				return nil, fmt.Errorf("unexpected argument %q", args[i+1])
			}
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			return nil, fmt.Errorf("unexpected argument %q (etcd takes flags only)", a)
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if n, value, ok := strings.Cut(name, "="); ok {
			out[n] = value
			continue
		}
		if !bools[name] && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			out[name] = args[i+1]
			i++
			continue
		}
		out[name] = "true"
	}
	return out, nil
}

// etcdVars are the ETCD_* variables of env, sorted (the member's own configuration).
func etcdVars(env Environment) []string {
	var out []string
	for name, value := range env.Vars {
		if strings.HasPrefix(name, "ETCD_") {
			out = append(out, name+"="+value)
		}
	}
	sort.Strings(out)
	return out
}
