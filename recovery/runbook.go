package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/runtime/runbook"
)

// The steps of members on nodes etcdmedic cannot act on: printed for the operator, confirmed,
// and checked over the etcd API wherever the API can show it.

// servesWrites is one quick try of a write through m.
func (a *Applier) servesWrites(ctx context.Context, m PlanMember) bool {
	cli, err := a.client(m.ClientURLs)
	if err != nil {
		return false
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = cli.Put(pctx, "etcdmedic/recovery", time.Now().UTC().Format(time.RFC3339Nano))
	return err == nil
}

// operatorBackup has the operator archive a data dir etcdmedic cannot read, with its checksum,
// and records in the backup folder where that archive is (etcdmedic cannot verify it).
func (a *Applier) operatorBackup(m PlanMember) error {
	final := filepath.Join(a.Plan.BackupDir, m.Name)
	if err := verifyBackup(final); err == nil {
		a.say("%s: the operator's backup is on record in %s", m.Name, final)
		return nil
	}
	op := a.Operator
	archive := fmt.Sprintf("/var/backups/etcdmedic-%s-%s.tar", m.Name, a.Plan.CreatedAt.Format("20060102T150405Z"))
	commands := []string{fmt.Sprintf("if [ -e %s ]; then mkdir -p /var/backups && tar -C %s -cf %s %s && sha256sum %s > %s.sha256 && sync && sha256sum -c %s.sha256; fi",
		runbook.Quote(m.DataDir), runbook.Quote(filepath.Dir(m.DataDir)), archive, runbook.Quote(filepath.Base(m.DataDir)), archive, archive, archive)}
	if m.WALDir != "" {
		// The log apart from the data: a db without it is no backup of the member.
		wal := strings.TrimSuffix(archive, ".tar") + "-wal.tar"
		commands = append(commands, fmt.Sprintf("if [ -e %s ]; then tar -C %s -cf %s %s && sha256sum %s > %s.sha256 && sync && sha256sum -c %s.sha256; fi",
			runbook.Quote(m.WALDir), runbook.Quote(filepath.Dir(m.WALDir)), wal, runbook.Quote(filepath.Base(m.WALDir)), wal, wal, wal))
	}
	if err := op.Confirm(runbook.Checkpoint{
		Node:     m.Name,
		Title:    fmt.Sprintf("back up %s's data dir %s (etcdmedic cannot read it from here)", m.Name, m.DataDir),
		Commands: commands,
		Notes:    []string{"keep the archive until the cluster has run well for a while; etcdmedic cannot see it"},
	}); err != nil {
		return err
	}
	if err := backup.MkdirAllSynced(filepath.Join(final, "data")); err != nil {
		return err
	}
	man := backupManifest{Member: m.Name, Source: m.Name + ":" + m.DataDir, TakenBy: "operator, into " + m.Name + ":" + archive, At: time.Now().UTC()}
	return backup.WriteJSONAtomic(filepath.Join(final, "manifest.json"), man)
}

// quarantineName is where a runbook member's old data goes, beside it.
func (a *Applier) quarantineName(m PlanMember) string {
	return fmt.Sprintf("%s.etcdmedic-quarantine-%s", strings.TrimRight(m.DataDir, "/"), a.Plan.CreatedAt.Format("20060102T150405Z"))
}

// operatorQuarantine has the operator move the member's old data aside (never delete it); where
// the data dir is visible from here, that it moved is checked.
func (a *Applier) operatorQuarantine(m PlanMember, rep *Report) error {
	if _, err := os.Stat(m.DataDir); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(a.quarantineName(m)); err == nil {
			rep.Quarantines = append(rep.Quarantines, a.quarantineName(m))
			return nil // moved at an earlier checkpoint
		}
	}
	op := a.Operator
	dest := a.quarantineName(m)
	c := runbook.Checkpoint{
		Node:     m.Name,
		Title:    fmt.Sprintf("move %s's old data aside (never delete it): the member rejoins with an empty data dir", m.Name),
		Commands: []string{fmt.Sprintf("if [ -e %s ]; then mv -n %s %s; fi", runbook.Quote(m.DataDir), runbook.Quote(m.DataDir), runbook.Quote(dest))},
	}
	if m.WALDir != "" {
		// Its WAL apart moves aside too, beside itself: started on it, the new member would
		// replay the old log.
		walDest := fmt.Sprintf("%s.etcdmedic-quarantine-%s", strings.TrimRight(m.WALDir, "/"), a.Plan.CreatedAt.Format("20060102T150405Z"))
		c.Commands = append([]string{fmt.Sprintf("if [ -e %s ]; then mv -n %s %s; fi", runbook.Quote(m.WALDir), runbook.Quote(m.WALDir), runbook.Quote(walDest))}, c.Commands...)
	}
	for try := 0; try < 3; try++ {
		if err := op.Confirm(c); err != nil {
			return err
		}
		if isMissingOrEmpty(m.DataDir) {
			rep.Quarantines = append(rep.Quarantines, m.Name+":"+dest)
			return nil
		}
		c.Title = fmt.Sprintf("%s still holds data here: move it aside", m.DataDir)
	}
	return fmt.Errorf("%s still holds data after three checkpoints", m.DataDir)
}

// isMissingOrEmpty reports whether dir holds nothing (or is not there at all).
func isMissingOrEmpty(dir string) bool {
	ents, err := os.ReadDir(dir)
	return errors.Is(err, os.ErrNotExist) || (err == nil && len(ents) == 0)
}

// rejoinByKubeadm has the operator rejoin a reset node with kubeadm join --control-plane
// (kubeadm adds its etcd member as a learner and promotes it), then checks over the etcd API
// that the member is a started voter that serves.
func (a *Applier) rejoinByKubeadm(ctx context.Context, m PlanMember, rep *Report) error {
	if ok, _ := a.joinedVoter(ctx, m); ok {
		a.say("%s has already joined as a voter and serves", m.Name)
		return nil
	}
	op := a.Operator
	survivor := a.Plan.Survivor
	if err := op.Confirm(runbook.Checkpoint{
		Node:  survivor,
		Title: fmt.Sprintf("make the credentials %s joins with (they expire: certificate key in 2 h, token in 24 h)", m.Name),
		Commands: []string{
			"kubeadm init phase upload-certs --upload-certs   # prints the certificate key",
			"kubeadm token create --print-join-command        # prints the kubeadm join command",
		},
	}); err != nil {
		return err
	}
	q := a.quarantineName(m)
	dir := runbook.Quote(m.DataDir)
	c := runbook.Checkpoint{
		Node:  m.Name,
		Title: fmt.Sprintf("keep %s's old etcd data, reset the node, and join it again as a control-plane node", m.Name),
		Commands: []string{
			fmt.Sprintf("if [ -e %s ]; then mv -n %s %s; fi   # kubeadm reset would delete it", dir, dir, runbook.Quote(q)),
			fmt.Sprintf("[ ! -e %s ] && kubeadm reset -f   # only once the old data is out of the way", dir),
			"<the kubeadm join command printed on " + survivor + "> --control-plane --certificate-key <the key printed on " + survivor + ">",
		},
		Notes: []string{"kubeadm join adds the etcd member as a learner and promotes it once it has caught up (kubeadm >= 1.32, or EtcdLearnerMode)"},
	}
	for try := 0; try < 3; try++ {
		if err := op.Confirm(c); err != nil {
			return err
		}
		ok, why := a.waitJoinedVoter(ctx, m)
		if ok {
			rep.Quarantines = append(rep.Quarantines, m.Name+":"+q)
			a.say("checked: %s is a voter and serves", m.Name)
			return nil
		}
		c.Title = fmt.Sprintf("%s has not joined yet (%s): check kubeadm's output and the etcd pod's log on %s", m.Name, why, m.Name)
		c.Commands = []string{"crictl ps -a --name etcd", "crictl logs $(crictl ps -a --name etcd -q | head -1) 2>&1 | tail -20"}
	}
	return fmt.Errorf("%s did not join after three checkpoints", m.Name)
}

// waitJoinedVoter waits (up to the step timeout) until m is a voter that serves, writing a
// harmless key meanwhile (a learner on an idle cluster can stall without one).
func (a *Applier) waitJoinedVoter(ctx context.Context, m PlanMember) (bool, string) {
	deadline := time.Now().Add(a.Timeout)
	why := ""
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var ok bool
		if ok, why = a.joinedVoter(ctx, m); ok {
			return true, ""
		}
		a.servesWrites(ctx, a.Plan.Member(a.Plan.Survivor))
		time.Sleep(500 * time.Millisecond)
	}
	return false, why
}

// joinedVoter reports whether a member with m's peer URLs is a started voter that answers
// Status, and if not, why.
func (a *Applier) joinedVoter(ctx context.Context, m PlanMember) (bool, string) {
	var eps []string
	for _, o := range a.Plan.Members {
		eps = append(eps, o.ClientURLs...)
	}
	cli, err := a.client(eps)
	if err != nil {
		return false, err.Error()
	}
	defer cli.Close()
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	list, err := cli.MemberList(lctx)
	if err != nil {
		return false, "member list: " + err.Error()
	}
	for _, mem := range list.Members {
		if !slices.ContainsFunc(mem.PeerURLs, func(u string) bool { return slices.Contains(m.PeerURLs, u) }) {
			continue
		}
		switch {
		case mem.IsLearner:
			return false, "it is still a learner"
		case mem.Name == "":
			return false, "it was added but has not started"
		}
		for _, u := range mem.ClientURLs {
			sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := cli.Status(sctx, u)
			scancel()
			if err == nil {
				return true, ""
			}
		}
		return false, "it does not answer on " + strings.Join(mem.ClientURLs, ",")
	}
	return false, "no member has peer URL " + strings.Join(m.PeerURLs, ",")
}
