package crashfs

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The protocol between Start and Serve: one command per line on the server's control input,
// one JSON reply per line on its reply output. The first reply says whether the mount serves.
//
//	unsynced             -> {"pending":{...}}
//	cut {cutRequest}     -> {"report":{...}}, "error" if the cut went wrong; the server exits
//	unmount              -> {} or {"error":...}; on success the server exits
//
// EOF on the control input means the parent died: the server unmounts, keeping everything.
const (
	cmdUnsynced = "unsynced"
	cmdCut      = "cut"
	cmdUnmount  = "unmount"
)

// cutRequest is CutOptions on the wire: a seed instead of a random source.
type cutRequest struct {
	Tear      bool   `json:"tear,omitempty"`
	TearPath  string `json:"tearPath,omitempty"`
	TearPages int    `json:"tearPages,omitempty"`
	// Seed, when not 0, seeds the PCG that chooses the pages a tear keeps.
	Seed uint64 `json:"seed,omitempty"`
}

// reply is one line the server writes.
type reply struct {
	Ready bool   `json:"ready,omitempty"`
	Error string `json:"error,omitempty"`
	// Unavailable marks an error that wraps ErrUnavailable.
	Unavailable bool       `json:"unavailable,omitempty"`
	Pending     *Pending   `json:"pending,omitempty"`
	Report      *CutReport `json:"report,omitempty"`
}

// leaveTimeout bounds how long a server whose parent died retries a clean unmount while the
// parent's own children may still hold the mount.
const leaveTimeout = 10 * time.Second

// Serve mounts a crash filesystem over backing at mountpoint and serves it until a cut, an
// unmount, or EOF on control (the parent died: it unmounts, keeping everything). It reads
// commands from control and writes replies to replies (see the protocol above); the first
// reply is a ready line, or the mount error, which Serve also returns. Run it in a process
// of its own: a process that mmaps a file on its own FUSE mount can deadlock in the GC.
func Serve(backing, mountpoint string, control io.Reader, replies io.Writer) error {
	out := json.NewEncoder(replies)
	f, err := Mount(backing, mountpoint)
	if err != nil {
		return errors.Join(err, out.Encode(errorReply(err)))
	}
	if err := out.Encode(reply{Ready: true}); err != nil {
		return errors.Join(fmt.Errorf("write the ready line: %w", err), f.leave())
	}
	in := bufio.NewScanner(control)
	for in.Scan() {
		r, done, cmdErr := f.handle(in.Text())
		if err := out.Encode(r); err != nil {
			// Nobody reads the replies: the parent is gone.
			return errors.Join(cmdErr, fmt.Errorf("write a reply: %w", err), f.leave())
		}
		if done {
			return cmdErr
		}
	}
	return f.leave()
}

// handle runs one command line; done says the mount is gone and the server should exit.
func (f *FS) handle(line string) (r reply, done bool, err error) {
	name, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
	switch name {
	case cmdUnsynced:
		p := f.Unsynced()
		return reply{Pending: &p}, false, nil
	case cmdCut:
		var req cutRequest
		if err := json.Unmarshal([]byte(arg), &req); err != nil {
			err = fmt.Errorf("cut options %q: %w", arg, err)
			return errorReply(err), false, err
		}
		report, err := f.Cut(req.options())
		r := errorReply(err)
		r.Report = report
		return r, true, err
	case cmdUnmount:
		// A failed unmount (the mount is busy) leaves it serving: the parent may cut instead.
		err := f.Unmount()
		return errorReply(err), err == nil, err
	}
	err = fmt.Errorf("unknown crash filesystem command %q", line)
	return errorReply(err), false, err
}

// options rebuilds the CutOptions the request came from.
func (req cutRequest) options() CutOptions {
	opts := CutOptions{Tear: req.Tear, TearPath: req.TearPath, TearPages: req.TearPages}
	if req.Seed != 0 {
		opts.Rand = rand.New(rand.NewPCG(req.Seed, req.Seed))
	}
	return opts
}

// errorReply is the reply for err; an empty reply for nil.
func errorReply(err error) reply {
	if err == nil {
		return reply{}
	}
	return reply{Error: err.Error(), Unavailable: errors.Is(err, ErrUnavailable)}
}

// leave unmounts because the parent is gone, keeping everything. While something still holds
// the mount it retries; past leaveTimeout it detaches the mount, whose users then get errors
// once this process exits.
func (f *FS) leave() error {
	deadline := time.Now().Add(leaveTimeout)
	for {
		err := f.Unmount()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			if derr := unix.Unmount(f.mountpoint, unix.MNT_DETACH); derr != nil && !errors.Is(derr, unix.EINVAL) {
				err = errors.Join(err, fmt.Errorf("detach %s: %w", f.mountpoint, derr))
			}
			return fmt.Errorf("control closed, mount still busy after %s, detached: %w", leaveTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
