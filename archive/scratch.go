package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// scratch is a one-member etcd restored from a snapshot, on 127.0.0.1, for as long as a
// verification or a replay needs it: never a member of anything, removed with its folder.
type scratch struct {
	cli      *clientv3.Client
	endpoint string
	log      string
	cmd      *exec.Cmd
	exited   chan struct{} // closed once its etcd has exited
}

// Credentials are a user of the backup's own auth store (with the root role), for a scratch
// member restored from a backup taken with auth enabled: etcd refuses it hashkv, reads and
// writes otherwise.
type Credentials struct {
	User, Password string
}

// forBackup returns c when f was taken with auth enabled, none otherwise (etcd refuses a
// login when auth is off), or an error when they are needed and not given.
func (c Credentials) forBackup(f *Full) (Credentials, error) {
	switch {
	case !f.AuthEnabled:
		return Credentials{}, nil
	case c.User == "":
		return c, fmt.Errorf("backup %s was taken with auth enabled: the member restored from it answers only a user of its own auth store with the root role (give --user root:PASSWORD)", f.ID)
	}
	return c, nil
}

// restoreFailed is etcdutl refusing the snapshot: the backup's fault, not the machine's.
type restoreFailed struct{ msg string }

func (r restoreFailed) Error() string { return r.msg }

// startScratch restores snap with etcdutl into dir/<name>.etcd and starts etcd on it (with
// extra flags); the caller stops it.
func startScratch(ctx context.Context, snap, dir, name string, etcd, etcdutl []string, creds Credentials, extra ...string) (*scratch, error) {
	fi, err := os.Stat(snap)
	if err != nil {
		return nil, err
	}
	if err := scratchRoom(dir, fi.Size()); err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	client, peer := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	data := filepath.Join(dir, name+".etcd")
	var out bytes.Buffer
	restore := etcdutlCommand(ctx, etcdutl, "snapshot", "restore", snap, "--data-dir", data, "--name", name,
		"--initial-cluster", name+"="+peer, "--initial-advertise-peer-urls", peer)
	restore.Stdout, restore.Stderr = &out, &out
	if err := restore.Run(); err != nil {
		if roomErr := scratchRoom(dir, fi.Size()); roomErr != nil {
			return nil, fmt.Errorf("etcdutl snapshot restore: %v: %w", lastLine(out.String()), roomErr)
		}
		return nil, restoreFailed{fmt.Sprintf("etcdutl snapshot restore: %v: %s", err, lastLine(out.String()))}
	}
	s := &scratch{endpoint: client, log: filepath.Join(dir, name+".log")}
	log, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	s.cmd = exec.Command(etcd[0], append(append(append([]string{}, etcd[1:]...), "--name", name, "--data-dir", data,
		"--listen-client-urls", client, "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", name+"="+peer), extra...)...)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the scratch member: %w", err)
	}
	s.exited = make(chan struct{})
	go func() { s.cmd.Wait(); close(s.exited) }()
	if s.cli, err = scratchClient(ctx, client, creds); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// scratchClient is a client of the scratch member; with credentials it logs in once the member
// serves (a login needs the member up, and clientv3.New logs in at once).
func scratchClient(ctx context.Context, endpoint string, creds Credentials) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), Username: creds.User, Password: creds.Password}
	if creds.User == "" {
		return clientv3.New(cfg)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cli, err := clientv3.New(cfg)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			if err != nil {
				return nil, fmt.Errorf("log in to the scratch member as %s: %w", creds.User, err)
			}
			return cli, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lastLog is the last line of its log, for an error.
func (s *scratch) lastLog() string {
	b, _ := os.ReadFile(s.log)
	return lastLine(string(b))
}

func (s *scratch) stop() {
	if s.cli != nil {
		s.cli.Close()
	}
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

// scratchPatience is how long a scratch member may take to answer: opening a large db and
// rebuilding its index takes a while, more on a busy machine. Past it the verification could
// not run; it says nothing about the backup.
var scratchPatience = 5 * time.Minute

// errRestoredMemberExited is a scratch member whose etcd exited before it answered: etcd
// refused the restored data.
var errRestoredMemberExited = errors.New("the restored member exited")

// answer calls call until it succeeds. It fails with errRestoredMemberExited (the member's last
// log line with it) when the member's etcd exits first, with ctx's error when ctx ends, and
// with errScratchUnanswered when the member runs but does not answer within scratchPatience:
// only the first says something about the backup.
func (s *scratch) answer(ctx context.Context, what string, call func(context.Context) error) error {
	deadline := time.Now().Add(scratchPatience)
	for {
		cctx, cancel := context.WithDeadline(ctx, deadline)
		go func() {
			select {
			case <-s.exited:
				cancel()
			case <-cctx.Done():
			}
		}()
		err := call(cctx)
		cancel()
		select {
		case <-s.exited:
			return fmt.Errorf("%w before it answered %s (%s)", errRestoredMemberExited, what, s.lastLog())
		default:
		}
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("%w: %s within %s: %v (%s)", errScratchUnanswered, what, scratchPatience, err, s.lastLog())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// errScratchUnanswered is a scratch member that runs but did not answer in time: the machine is
// too slow or too busy, which says nothing about the backup.
var errScratchUnanswered = errors.New("the restored member runs but did not answer")

// scratchFolder makes a private folder for one restore under scratch; the caller removes it.
func scratchFolder(scratch, prefix string) (string, error) {
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return "", err
	}
	return os.MkdirTemp(scratch, prefix)
}

// walRoom is what a restored member needs beside its db: etcd preallocates a 64 MiB WAL segment,
// and some room to run.
const walRoom = 80 << 20

// scratchRoom is an error when dir's file system has too little room for a scratch member of a
// snapBytes snapshot (its db, the snapshot a replay takes of it, and the WAL): a full disk is
// the machine's problem, never reported as a backup that does not restore.
func scratchRoom(dir string, snapBytes int64) error {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return err
	}
	free, need := int64(fs.Bavail)*fs.Bsize, 2*snapBytes+walRoom
	if free < need {
		return fmt.Errorf("the scratch folder %s has %d MiB free; restoring a %d MiB snapshot there needs about %d MiB (point TMPDIR at a roomier folder)", dir, free>>20, snapBytes>>20, need>>20)
	}
	return nil
}
