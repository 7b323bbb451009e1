package main

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/etcdmedic/etcdmedic/deployment"
)

// deploymentFlags read a member's data dir, WAL dir, name and URLs from how it is really run,
// instead of from flags typed by hand (see package deployment).
type deploymentFlags struct {
	walDir      string
	fromProcess int
	fromConfig  string
	fromUnit    string
}

func (d *deploymentFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&d.walDir, "wal-dir", "", "the member's --wal-dir, when its WAL lives apart from the data dir")
	d.registerFrom(fs)
}

// registerFrom registers the --from-* flags only (for a command with its own --wal-dir).
func (d *deploymentFlags) registerFrom(fs *pflag.FlagSet) {
	fs.IntVar(&d.fromProcess, "from-process", 0, "read the member's configuration from this running etcd (or pd-server) process: its flags, ETCD_* variables and working directory")
	fs.StringVar(&d.fromConfig, "from-config", "", "read the member's configuration from its etcd config file (--config-file YAML), or a TiDB PD config (.toml)")
	fs.StringVar(&d.fromUnit, "from-unit", "", "read the member's configuration from its systemd unit (systemctl cat NAME), or from a unit file's path")
}

// resolve returns the member's spec when a --from-* flag was given (nil otherwise), with
// --wal-dir applied over it.
func (d deploymentFlags) resolve() (*deployment.Spec, error) {
	given := 0
	for _, set := range []bool{d.fromProcess != 0, d.fromConfig != "", d.fromUnit != ""} {
		if set {
			given++
		}
	}
	if given > 1 {
		return nil, errors.New("give one of --from-process, --from-config and --from-unit")
	}
	var s deployment.Spec
	var err error
	switch {
	case d.fromProcess != 0:
		s, err = deployment.FromProcess(d.fromProcess)
	case d.fromConfig != "":
		s, err = d.resolveConfig()
	case d.fromUnit != "":
		s, err = deployment.FromUnit(d.fromUnit)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if d.walDir != "" {
		s.WALDir = d.walDir
		s.Origins["wal-dir"] = "flag --wal-dir of etcdmedic"
	}
	return &s, nil
}

// dataDirFrom settles the data dir and WAL dir of a command that takes one data dir: the one
// given, the one the deployment says, or both when they agree.
func (d deploymentFlags) dataDirFrom(given string) (dataDir, walDir string, spec *deployment.Spec, err error) {
	spec, err = d.resolve()
	if err != nil {
		return "", "", nil, err
	}
	if spec == nil {
		if given == "" {
			return "", "", nil, errors.New("give the data dir, or how the member runs: --from-process PID, --from-config FILE, --from-unit NAME")
		}
		return given, d.walDir, nil, nil
	}
	if given != "" && !samePath(given, spec.DataDir) {
		return "", "", nil, errors.New("the data dir given (" + given + ") is not the one the member runs with (" + spec.DataDir + ", " + spec.Origins["data-dir"] + ")")
	}
	return spec.DataDir, spec.WALDir, spec, nil
}

func samePath(a, b string) bool {
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	if errA != nil || errB != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ra == rb
}

// resolveConfig reads --from-config: etcd's YAML, or a PD config (.toml).
func (d deploymentFlags) resolveConfig() (deployment.Spec, error) {
	if strings.HasSuffix(d.fromConfig, ".toml") {
		return deployment.FromPDConfig(d.fromConfig)
	}
	return deployment.FromConfigFile(d.fromConfig)
}

// givenMember is the --from-* flag that named the member, with the flags given over it
// (--wal-dir, --name, --peer-urls), for a command printed to run again; nil without one (the
// data dir, WAL dir, name and peer URLs were given as flags).
func (d deploymentFlags) givenMember(f *pflag.FlagSet) []string {
	var args []string
	switch {
	case d.fromProcess != 0:
		args = []string{"--from-process", strconv.Itoa(d.fromProcess)}
	case d.fromConfig != "":
		args = []string{"--from-config", d.fromConfig}
	case d.fromUnit != "":
		args = []string{"--from-unit", d.fromUnit}
	default:
		return nil
	}
	for _, name := range []string{"wal-dir", "name", "peer-urls"} {
		if fl := f.Lookup(name); fl != nil && fl.Changed {
			args = append(args, "--"+name, strings.Trim(fl.Value.String(), "[]"))
		}
	}
	return args
}
