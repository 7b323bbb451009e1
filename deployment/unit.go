package deployment

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"
)

// Host is what a unit's specifiers name: %H and %m.
type Host struct {
	Hostname  string
	MachineID string
}

// LocalHost is this machine, for units read here.
func LocalHost() Host {
	h, _ := os.Hostname()
	id, _ := os.ReadFile("/etc/machine-id")
	return Host{Hostname: h, MachineID: strings.TrimSpace(string(id))}
}

// FromUnit resolves a member run by the systemd unit name, as `systemctl cat` shows it (the
// unit file and its drop-ins). A path (with a slash) is read as the unit file itself, for a
// node where systemctl cannot be run.
func FromUnit(name string) (Spec, error) {
	if strings.Contains(name, "/") {
		b, err := os.ReadFile(name)
		if err != nil {
			return Spec{}, fmt.Errorf("read unit file: %w", err)
		}
		return FromUnitFile(filepath.Base(name), b, LocalHost())
	}
	if _, err := exec.LookPath("systemctl"); err != nil {
		return Spec{}, fmt.Errorf("systemctl is not available here: give the unit file's path instead (--from-unit /etc/systemd/system/%s)", name)
	}
	out, err := exec.Command("systemctl", "cat", "--", name).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return Spec{}, fmt.Errorf("systemctl cat %s: %s (give the unit file's path instead where systemctl cannot run)", name, strings.Join(strings.Fields(string(ee.Stderr)), " "))
		}
		return Spec{}, fmt.Errorf("systemctl cat %s: %w", name, err)
	}
	return FromUnitFile(name, out, LocalHost())
}

// FromUnitFile resolves a member from a unit's text (with its drop-ins after it, as systemctl
// cat prints them): the [Service] section's ExecStart=, Environment=, EnvironmentFile= and
// WorkingDirectory=, with systemd's quoting, specifiers and $VARIABLE expansion. An ExecStart
// that is a shell (bash -c "... /usr/bin/etcd ...", as Fedora's unit had) is read through.
func FromUnitFile(name string, text []byte, host Host) (Spec, error) {
	if !strings.Contains(name, ".") {
		name += ".service"
	}
	opts, err := unit.DeserializeOptions(bytes.NewReader(text))
	if err != nil {
		return Spec{}, fmt.Errorf("unit %s: %w", name, err)
	}
	env := Environment{Vars: map[string]string{}, From: map[string]string{}}
	var execStart string
	// systemd.exec(5): variables from EnvironmentFile= override those of Environment=, whatever
	// the order of the lines (a drop-in's Environment= does not beat the unit's file), and an
	// empty assignment of either resets what the lines before it set.
	var assignments [][2]string
	var envFiles []string
	for _, o := range opts {
		if o.Section != "Service" {
			continue
		}
		value := strings.TrimSpace(strings.ReplaceAll(o.Value, "\\\n", " "))
		value = expandSpecifiers(value, name, host)
		switch o.Name {
		case "ExecStart":
			execStart = value // an empty ExecStart= (in a drop-in) resets it
		case "Environment":
			if value == "" {
				assignments = nil
			}
			for _, w := range splitUnitWords(value) {
				if k, v, ok := strings.Cut(w, "="); ok {
					assignments = append(assignments, [2]string{k, v})
				}
			}
		case "EnvironmentFile":
			if value == "" {
				envFiles = nil
				continue
			}
			envFiles = append(envFiles, value)
		case "WorkingDirectory":
			env.Dir = strings.TrimPrefix(value, "-")
		}
	}
	for _, kv := range assignments {
		env.Vars[kv[0]], env.From[kv[0]] = kv[1], "Environment= of "+name
	}
	for _, f := range envFiles {
		if err := readEnvironmentFile(f, &env); err != nil {
			return Spec{}, fmt.Errorf("unit %s: %w", name, err)
		}
	}
	if execStart == "" {
		return Spec{}, fmt.Errorf("unit %s has no ExecStart= in [Service]", name)
	}
	argv, err := commandOf(execStart, env)
	if err != nil {
		return Spec{}, fmt.Errorf("unit %s: %w", name, err)
	}
	s, err := FromCommand(argv, env)
	if err != nil {
		return Spec{}, fmt.Errorf("unit %s: %w", name, err)
	}
	s.Runs.Kind, s.Runs.Unit = Systemd, name
	s.Runs.Stop, s.Runs.Start = "systemctl stop "+name, "systemctl start "+name
	return s, nil
}

// readEnvironmentFile reads one EnvironmentFile= (a leading "-": it may be missing).
func readEnvironmentFile(value string, env *Environment) error {
	path, optional := strings.CutPrefix(value, "-")
	b, err := os.ReadFile(path)
	if err != nil {
		if optional && errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("EnvironmentFile=%s: %w", value, err)
	}
	for _, line := range strings.Split(strings.ReplaceAll(string(b), "\\\n", ""), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if words := splitUnitWords(v); len(words) == 1 && len(v) > 1 && (v[0] == '"' || v[0] == '\'') {
			v = words[0]
		}
		env.Vars[k], env.From[k] = v, "EnvironmentFile "+path
	}
	return nil
}

// commandOf turns ExecStart= into the argv of the etcd it runs.
func commandOf(execStart string, env Environment) ([]string, error) {
	execStart = strings.TrimLeft(execStart, "-@:+!")
	var argv []string
	for _, w := range splitUnitWords(execStart) {
		if name, ok := wholeVariable(w); ok {
			argv = append(argv, strings.Fields(env.Vars[name])...) // $VAR: split into words
			continue
		}
		argv = append(argv, expandVariables(w, env.Vars))
	}
	if len(argv) == 0 {
		return nil, errors.New("ExecStart= is empty")
	}
	switch filepath.Base(argv[0]) {
	case "bash", "sh", "dash":
		for i := 1; i+1 < len(argv); i++ {
			if argv[i] == "-c" {
				return shellCommand(argv[i+1], env)
			}
		}
	case "docker", "podman", "nerdctl":
		return nil, fmt.Errorf("it runs etcd in a container (%s): its data dir inside the container is not a path here; give the host folder mounted into it", filepath.Base(argv[0]))
	}
	return argv, nil
}

// shellCommand reads the etcd command out of a shell script line: assignments and exec
// before it are skipped, variables expanded, quotes removed.
func shellCommand(script string, env Environment) ([]string, error) {
	words := splitUnitWords(script)
	for i, w := range words {
		base := filepath.Base(expandVariables(w, env.Vars))
		if base == "etcd" || base == "pd-server" || base == "etcdmedic" {
			var argv []string
			for _, a := range words[i:] {
				if a == ";" || a == "&&" || a == "|" {
					break
				}
				argv = append(argv, expandVariables(a, env.Vars))
			}
			return argv, nil
		}
	}
	return nil, fmt.Errorf("no etcd command in the shell line %q", script)
}

// splitUnitWords splits a value as systemd does: on whitespace, with "double" and 'single'
// quotes and backslash escapes.
func splitUnitWords(s string) []string {
	var out []string
	var cur strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != '\'' && c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case quote != 0:
			cur.WriteByte(c)
		case c == '"' || c == '\'':
			quote, inWord = c, true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// wholeVariable reports whether w is exactly $NAME (systemd splits its value into words).
func wholeVariable(w string) (string, bool) {
	if len(w) < 2 || w[0] != '$' || w[1] == '{' {
		return "", false
	}
	for _, c := range w[1:] {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return "", false
		}
	}
	return w[1:], true
}

// expandVariables replaces ${NAME} (and $NAME) inside a word.
func expandVariables(w string, vars map[string]string) string {
	return os.Expand(w, func(name string) string { return vars[name] })
}

// expandSpecifiers replaces the unit specifiers etcd units use.
func expandSpecifiers(s, unitName string, host Host) string {
	if !strings.Contains(s, "%") {
		return s
	}
	prefix, _, _ := strings.Cut(strings.TrimSuffix(unitName, filepath.Ext(unitName)), "@")
	_, instance, _ := strings.Cut(strings.TrimSuffix(unitName, filepath.Ext(unitName)), "@")
	r := strings.NewReplacer("%%", "%", "%n", unitName, "%N", strings.TrimSuffix(unitName, filepath.Ext(unitName)),
		"%p", prefix, "%i", instance, "%I", instance, "%H", host.Hostname, "%m", host.MachineID)
	return r.Replace(s)
}
