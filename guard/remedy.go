package guard

import (
	"fmt"
	"strings"

	"github.com/etcdmedic/etcdmedic"
)

// The commands a run prints as its next steps: each must do what it says when copied, so each
// is rebuilt from what the run was given (the member as it was named, the connection flags
// but never a password) and never carries an empty value.

// guardCommand is this guard run again, with extra flags.
func (o Options) guardCommand(extra ...string) string {
	args := append([]string{"etcdmedic", "guard"}, o.memberFlags()...)
	args = append(append(args, connFlags(o)...), extra...)
	return shellJoin(args)
}

// memberFlags names the member as the run was given it.
func (o Options) memberFlags() []string {
	if o.MemberFlags != nil {
		return o.MemberFlags
	}
	args := []string{"--data-dir", o.DataDir}
	if o.WALDir != "" {
		args = append(args, "--wal-dir", o.WALDir)
	}
	if o.Expect.Name != "" {
		args = append(args, "--name", o.Expect.Name)
	}
	if len(o.Expect.PeerURLs) > 0 {
		args = append(args, "--peer-urls", strings.Join(o.Expect.PeerURLs, ","))
	}
	return args
}

// connFlags reach the cluster as this run did, in etcdctl's (and etcdmedic's) flags. A
// password is left out: etcdctl and etcdmedic ask for it (or read ETCDCTL_PASSWORD).
func connFlags(o Options) []string {
	c := o.Conn
	args := []string{"--endpoints=" + strings.Join(c.Endpoints, ",")}
	for _, f := range []struct{ name, value string }{{"cacert", c.CACert}, {"cert", c.Cert}, {"key", c.Key}} {
		if f.value != "" {
			args = append(args, "--"+f.name+"="+f.value)
		}
	}
	if c.InsecureSkipVerify {
		args = append(args, "--insecure-skip-tls-verify")
	}
	if user, _, _ := strings.Cut(c.User, ":"); user != "" {
		args = append(args, "--user="+user)
	}
	return args
}

// memberAdd is etcdctl's command adding the member as a learner, or, without its peer URLs,
// what to give guard for it.
func (o Options) memberAdd() string {
	if len(o.Expect.PeerURLs) == 0 {
		return "give guard the member's --name and --peer-urls (its --initial-advertise-peer-urls) to get the exact etcdctl member add command"
	}
	name := o.Expect.Name
	if name == "" {
		name = "NAME"
	}
	args := append([]string{"etcdctl"}, connFlags(o)...)
	return shellJoin(append(args, "member", "add", name, "--learner", "--peer-urls="+strings.Join(o.Expect.PeerURLs, ",")))
}

// orRejoin offers guard --rejoin, which needs the member's name and peer URLs.
func (o Options) orRejoin() string {
	if o.Expect.Name == "" || len(o.Expect.PeerURLs) == 0 {
		return ""
	}
	return " (or add --rejoin to the guard command)"
}

// memberReplace is the command that replaces m, the member whose data is gone, by a new
// member of the same name and peer URLs on this data dir (a snapshot first, into a folder
// beside it).
func (o Options) memberReplace(m *etcdmedic.Member) string {
	args := []string{"etcdmedic", "member", "replace", m.Name, "--name", m.Name, "--peer-urls", strings.Join(m.PeerURLs, ","),
		"--data-dir", o.DataDir, "--backup-dir", o.DataDir + ".replace-backup"}
	if o.WALDir != "" {
		args = append(args, "--wal-dir", o.WALDir)
	}
	return fmt.Sprintf("%s (or etcdctl member remove %s, then guard --rejoin)", shellJoin(append(args, connFlags(o)...)), m.ID)
}

// shellJoin quotes what a shell would split.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"$`\\;&|<>*?()[]{}#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
