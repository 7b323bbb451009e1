package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/etcdmedic/etcdmedic/deployment"
	"github.com/etcdmedic/etcdmedic/recovery"
)

// memberDeployments are recover plan's per-member ways to say how a member runs instead of
// (or besides) --data-dir NAME=PATH: its WAL dir apart, a process, a config file, a unit.
type memberDeployments struct {
	walDirs, processes, configs, units []string
}

func (d *memberDeployments) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&d.walDirs, "wal-dir", nil, "a member's --wal-dir as NAME=PATH, when its WAL lives apart from its data dir (repeatable)")
	fs.StringArrayVar(&d.processes, "from-process", nil, "a member read from its running process as NAME=PID: data dir, WAL dir, URLs (repeatable)")
	fs.StringArrayVar(&d.configs, "from-config", nil, "a member read from its etcd config file (or PD .toml) as NAME=FILE (repeatable)")
	fs.StringArrayVar(&d.units, "from-unit", nil, "a member read from its systemd unit as NAME=UNIT (or NAME=/path/to/unit): it is also stopped through that unit (repeatable)")
}

// apply settles each member's data dir and WAL dir: what --data-dir gave, what its deployment
// says (they must agree), and --wal-dir over both. Members named only by a deployment are
// added; a unit also becomes the member's --systemd-unit.
func (d memberDeployments) apply(members []recovery.MemberInput, units map[string]string) ([]recovery.MemberInput, error) {
	index := map[string]int{}
	for i, m := range members {
		index[m.Name] = i
	}
	settle := func(name, dataDir, walDir, from string) error {
		i, ok := index[name]
		if !ok {
			members = append(members, recovery.MemberInput{Name: name, DataDir: dataDir})
			i = len(members) - 1
			index[name] = i
		} else if !samePath(members[i].DataDir, dataDir) {
			return failf("", "member %s: --data-dir %s, but %s says %s", name, members[i].DataDir, from, dataDir)
		}
		if walDir != "" {
			members[i].WALDir = walDir
		}
		return nil
	}
	resolved := func(flag string, specs []string, read func(string) (deployment.Spec, error)) error {
		pairs, err := parsePairs(flag, "NAME=VALUE", specs)
		if err != nil {
			return err
		}
		for _, name := range slices.Sorted(maps.Keys(pairs)) {
			value := pairs[name]
			s, err := read(value)
			if err != nil {
				return failf("", "%s %s: %v", flag, name, err)
			}
			if err := settle(name, s.DataDir, s.WALDir, flag+" "+value); err != nil {
				return err
			}
			if s.Runs.Unit != "" && units[name] == "" && flag == "--from-unit" {
				units[name] = s.Runs.Unit
			}
		}
		return nil
	}
	if err := resolved("--from-process", d.processes, func(v string) (deployment.Spec, error) {
		pid, err := strconv.Atoi(v)
		if err != nil || pid <= 0 {
			return deployment.Spec{}, fmt.Errorf("%q is not a process ID (want NAME=PID)", v)
		}
		return deployment.FromProcess(pid)
	}); err != nil {
		return nil, err
	}
	if err := resolved("--from-config", d.configs, func(v string) (deployment.Spec, error) {
		return (deploymentFlags{fromConfig: v}).resolveConfig()
	}); err != nil {
		return nil, err
	}
	if err := resolved("--from-unit", d.units, deployment.FromUnit); err != nil {
		return nil, err
	}
	wals, err := parsePairs("--wal-dir", "NAME=PATH", d.walDirs)
	if err != nil {
		return nil, err
	}
	for name, dir := range wals {
		i, ok := index[name]
		if !ok {
			return nil, failf("", "--wal-dir %s: no --data-dir (or --from-*) names member %s", name, name)
		}
		members[i].WALDir = dir
	}
	return members, nil
}
