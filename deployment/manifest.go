package deployment

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// staticPod is the part of a pod manifest that says how etcd is started.
type staticPod struct {
	Kind string `json:"kind"`
	Spec struct {
		Containers []struct {
			Name    string   `json:"name"`
			Command []string `json:"command"`
			Args    []string `json:"args"`
			Env     []struct {
				Name      string `json:"name"`
				Value     string `json:"value"`
				ValueFrom any    `json:"valueFrom"`
			} `json:"env"`
		} `json:"containers"`
	} `json:"spec"`
}

// etcdContainer returns the command line and environment of the etcd container of a static
// pod manifest: its command and args (the image's etcd when it has no command), and its env:
// values (from: origin).
func etcdContainer(b []byte, origin string) ([]string, Environment, error) {
	var pod staticPod
	if err := yaml.Unmarshal(b, &pod); err != nil {
		return nil, Environment{}, fmt.Errorf("not YAML: %w", err)
	}
	for _, c := range pod.Spec.Containers {
		argv := append(append([]string{}, c.Command...), c.Args...)
		if len(c.Command) == 0 && c.Name == "etcd" {
			argv = append([]string{"etcd"}, c.Args...) // etcd's image runs etcd
		}
		if c.Name != "etcd" && (len(argv) == 0 || filepath.Base(argv[0]) != "etcd") {
			continue
		}
		env := Environment{Vars: map[string]string{}, From: map[string]string{}, Dir: "/"}
		for _, e := range c.Env {
			if e.ValueFrom != nil {
				if strings.HasPrefix(e.Name, "ETCD_") {
					return nil, Environment{}, fmt.Errorf("the etcd container's %s comes from valueFrom (a Secret, ConfigMap or field), which etcdmedic cannot read: give the member's data dir instead", e.Name)
				}
				continue
			}
			env.Vars[e.Name], env.From[e.Name] = e.Value, origin
		}
		return argv, env, nil
	}
	return nil, Environment{}, fmt.Errorf("no etcd container")
}

// ManifestFlags returns the settings of the etcd container of a static pod manifest by
// etcd's rules, by flag name: its flags (--f=v, --f v, -f v), then the ETCD_* values of its
// env: for what no flag sets. What etcd would refuse is an error: a stray argument, a flag and
// its variable both set. A container reading a config file is refused too: its settings are
// not flags.
func ManifestFlags(b []byte) (map[string]string, error) {
	argv, env, err := etcdContainer(b, "env: of the manifest")
	if err != nil {
		return nil, err
	}
	flags, err := parseFlags(argv[1:], etcdBoolFlags)
	if err != nil {
		return nil, fmt.Errorf("the etcd command %s: %w", strings.Join(argv, " "), err)
	}
	if path, _ := lookup(flags, env, "config-file"); path != "" || env.Vars[envVar("config-file")] != "" {
		return nil, fmt.Errorf("its etcd reads a config file (%s): etcdmedic reads and edits flags only", firstSet(path, env.Vars[envVar("config-file")]))
	}
	if err := conflicts(flags, env); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for name, value := range env.Vars {
		if key, ok := strings.CutPrefix(name, "ETCD_"); ok && value != "" {
			out[strings.ToLower(strings.ReplaceAll(key, "_", "-"))] = value
		}
	}
	for name, value := range flags {
		out[name] = value
	}
	return out, nil
}

// FromStaticPod resolves the member a kubeadm static pod manifest runs (kubeadm mounts the
// data dir and certificates at the same paths on the host): its etcd container's command line
// and env:, by etcd's rules.
func FromStaticPod(manifest string) (Spec, error) {
	b, err := os.ReadFile(manifest)
	if err != nil {
		return Spec{}, fmt.Errorf("read kubeadm manifest: %w", err)
	}
	argv, env, err := etcdContainer(b, "env: of "+manifest)
	if err != nil {
		return Spec{}, fmt.Errorf("kubeadm manifest %s: %w", manifest, err)
	}
	s, err := FromCommand(argv, env)
	if err != nil {
		return Spec{}, fmt.Errorf("kubeadm manifest %s: %w", manifest, err)
	}
	for key, origin := range s.Origins {
		s.Origins[key] = strings.Replace(origin, "flag ", "manifest's flag ", 1)
	}
	s.Runs = Runner{Kind: StaticPod, Manifest: manifest, Command: argv, Env: etcdVars(env),
		Stop:  "mv " + manifest + " <a folder outside kubelet's manifests>",
		Start: "mv it back to " + manifest}
	return s, nil
}
