// Package systemd stops a member that a systemd unit runs (etcd.service with Restart=always
// would start it again after any signal of ours): systemctl stop first, then whatever runs the
// member during the recovery.
package systemd

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic/runtime"
)

// Runtime is one member's unit.
type Runtime struct {
	Unit string
	// Then runs the member once the unit is stopped (a recovery starts it with its own flags),
	// and proves the stop by the data dir's locks.
	Then runtime.Runtime
	// Systemctl is the command (default "systemctl").
	Systemctl string
}

// StopCommand is what the operator would type.
func (r Runtime) StopCommand() string { return r.systemctl() + " stop " + r.Unit }

func (r Runtime) systemctl() string {
	if r.Systemctl == "" {
		return "systemctl"
	}
	return r.Systemctl
}

// Stop stops the unit, then the member (whatever still holds its data dir).
func (r Runtime) Stop(ctx context.Context, m runtime.MemberSpec) error {
	// systemd itself gives a unit 90 s to stop (DefaultTimeoutStopSec) before it kills it.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, r.systemctl(), "stop", r.Unit).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", r.StopCommand(), err, strings.TrimSpace(string(out)))
	}
	return r.Then.Stop(ctx, m)
}

// Start starts the member the recovery's way; the unit stays stopped until the operator hands
// the member back to it.
func (r Runtime) Start(ctx context.Context, m runtime.MemberSpec) error {
	return r.Then.Start(ctx, m)
}
