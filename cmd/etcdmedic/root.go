package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes shared by every command. Commands with richer outcomes (doctor, guard) document
// their own on top of these.
const (
	exitOK       = 0
	exitFindings = 1 // ran, and found something worth a look
	exitCritical = 2 // ran, and found something that needs action now
	exitFailed   = 3 // could not run: bad input, unreadable data, unreachable cluster
)

// cliError carries the exit code and an optional hint for the operator.
type cliError struct {
	code int
	err  error
	hint string
}

func (e *cliError) Error() string { return e.err.Error() }
func (e *cliError) Unwrap() error { return e.err }

// failf reports that a command could not run, with a hint that tells the operator what to try.
func failf(hint string, format string, args ...any) error {
	return &cliError{code: exitFailed, err: fmt.Errorf(format, args...), hint: hint}
}

// verdict ends a command that did run with a non-zero exit code (findings) without an error line.
type verdict struct{ code int }

func (v verdict) Error() string { return fmt.Sprintf("exit %d", v.code) }

type globalOptions struct {
	writeOut string
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	opts := &globalOptions{}
	root := &cobra.Command{
		Use:           "etcdmedic",
		Short:         "Detect, prevent and repair etcd membership failures, losing nothing",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVarP(&opts.writeOut, "write-out", "w", "table", "output format: table or json")
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if _, err := printerFor(opts.writeOut); err != nil {
			return err
		}
		warnTLSUnverified(cmd)
		return nil
	}
	root.AddCommand(
		newVersionCommand(opts),
		newInspectCommand(opts),
		newSandboxCommand(opts),
		newDoctorCommand(opts),
		newGuardCommand(opts),
		newScanCommand(opts),
		newMemberCommand(opts),
		newRecoverCommand(opts),
		newDrillCommand(opts),
		newUpgradeCommand(opts),
		newBackupCommand(opts),
		newRestoreCommand(opts),
	)
	root.AddCommand(&cobra.Command{
		Use:                linkedEtcdutlCommand,
		Short:              "Run the etcdutl linked into etcdmedic (takes etcdutl's own arguments)",
		Hidden:             true,
		DisableFlagParsing: true,
		Run:                func(cmd *cobra.Command, args []string) { os.Exit(runLinkedEtcdutl(args)) },
	})
	root.AddCommand(&cobra.Command{
		Use:                linkedEtcdCommand,
		Short:              "Run the etcd server linked into etcdmedic (takes etcd's own flags)",
		Hidden:             true,
		DisableFlagParsing: true,
		Run:                func(cmd *cobra.Command, args []string) { runLinkedEtcd(args) },
	})
	return root
}

// run executes one command line and turns its outcome into an exit code and one clear line.
//
// Every command runs under one context that SIGINT or SIGTERM cancels: the command stops where
// it is and returns, so that its deferred cleanups run (temporary db copies are removed, locks
// released) before etcdmedic exits. A second signal ends etcdmedic at once, as without it.
// A command stopped so exits 3 (exitFailed), whatever the error its stop caused says: a probe
// cut short is no proof that the cluster refused, nor that a plan is stale.
//
// SIGPIPE is caught too, so that a write to a closed stdout or stderr (the reader of a pipeline
// gone, often killed by the same Ctrl-C) returns EPIPE instead of killing etcdmedic before its
// cleanups; such a write stops the command as a signal does (stopOnEPIPE).
func run(args []string, stdout, stderr io.Writer) int {
	signalled, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(signalled, stop) // the first signal cancels; the next one gets Go's default
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE) // caught, not ignored: the etcds started keep the default
	defer signal.Stop(pipe)
	ctx, cancel := context.WithCancelCause(signalled)
	defer cancel(nil)
	stdout, stderr = stopOnEPIPE{stdout, cancel}, stopOnEPIPE{stderr, cancel}
	root := newRootCommand(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		// A command that ends on a signal by design (doctor --watch) finished its work.
		return exitOK
	}
	var v verdict
	if errors.As(err, &v) {
		return v.code
	}
	stopped := ctx.Err() != nil
	if cause := context.Cause(ctx); stopped && !errors.Is(err, cause) {
		err = fmt.Errorf("%w (stopped: %v)", err, cause) // the cause names the signal
	}
	fmt.Fprintf(stderr, "Error: %v\n", err)
	var ce *cliError
	switch {
	case stopped:
		// The command's own hint is about the error the stop caused, not about the stop.
		fmt.Fprintf(stderr, "Hint: stopped before it finished: run the same command again (an apply resumes where it stopped)\n")
		return exitFailed
	case errors.As(err, &ce):
		if ce.hint != "" {
			fmt.Fprintf(stderr, "Hint: %s\n", ce.hint)
		}
		return ce.code
	}
	return exitFailed
}

// errOutputClosed is why a command stopped when its stdout or stderr was closed.
var errOutputClosed = errors.New("output closed (broken pipe)")

// stopOnEPIPE is a command's stdout or stderr: a write that fails because its reader is gone
// (EPIPE) stops the command, through the cancel of its context.
type stopOnEPIPE struct {
	w    io.Writer
	stop context.CancelCauseFunc
}

func (s stopOnEPIPE) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		s.stop(errOutputClosed)
	}
	return n, err
}
