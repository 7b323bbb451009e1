package upgrade

import (
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// ErrRelativePath says a plan records a path that is not absolute: apply would resolve it
// against its own working directory, not the one the plan was made in.
var ErrRelativePath = errors.New("the plan records a relative path")

// absoluteMembers returns members with each data dir and WAL dir made absolute, against the
// working directory of the plan's maker: the plan records them, and apply may run from
// another directory (a systemd unit, cron, another shell).
func absoluteMembers(members []Member) ([]Member, error) {
	out := make([]Member, len(members))
	for i, m := range members {
		var err error
		if m.DataDir, err = absolutePath(m.DataDir); err != nil {
			return nil, fmt.Errorf("%s's data dir: %w", m.Name, err)
		}
		if m.WALDir, err = absolutePath(m.WALDir); err != nil {
			return nil, fmt.Errorf("%s's WAL dir: %w", m.Name, err)
		}
		out[i] = m
	}
	return out, nil
}

// absoluteBinaries returns binaries with each path made absolute: a bare name (etcd) is
// looked up in $PATH now, as a shell would, a path with a slash in it is taken from the
// working directory.
func absoluteBinaries(binaries map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(binaries))
	for version, bin := range binaries {
		path := bin
		if bin != "" && !strings.ContainsRune(bin, filepath.Separator) {
			found, err := exec.LookPath(bin)
			if err != nil {
				return nil, fmt.Errorf("--etcd-binary %s=%s: %w", version, bin, err)
			}
			path = found
		}
		abs, err := absolutePath(path)
		if err != nil {
			return nil, fmt.Errorf("--etcd-binary %s=%s: %w", version, bin, err)
		}
		out[version] = abs
	}
	return out, nil
}

// absolutePath is path made absolute ("" stays "").
func absolutePath(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	return filepath.Abs(path)
}

// relativePaths names every path of the plan that is not absolute (a plan made by an
// etcdmedic before paths were made absolute when the plan is made).
func (p *Plan) relativePaths() []string {
	var rel []string
	check := func(what, path string) {
		if path != "" && !filepath.IsAbs(path) {
			rel = append(rel, fmt.Sprintf("%s %q", what, path))
		}
	}
	for _, m := range p.Members {
		check(m.Name+"'s data dir", m.DataDir)
		check(m.Name+"'s WAL dir", m.WALDir)
	}
	for _, version := range slices.Sorted(maps.Keys(p.Binaries)) {
		check("the etcd binary of "+version, p.Binaries[version])
	}
	check("the backup dir", p.BackupDir)
	return rel
}
