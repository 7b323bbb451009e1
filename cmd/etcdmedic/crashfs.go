package main

import (
	"fmt"
	"os"

	"github.com/etcdmedic/etcdmedic/internal/crashfs"
)

// crashFSCommand serves a crash filesystem in its own process for the power-cut drill:
// `etcdmedic internal-crashfs BACKING MOUNTPOINT`, controlled over stdin and stdout. A process
// must not serve a FUSE mount it also reads through mmap (etcdmedic reads etcd's db so): a
// page fault waiting on its own server deadlocks it.
const crashFSCommand = "internal-crashfs"

func runCrashFS(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: etcdmedic internal-crashfs BACKING MOUNTPOINT (run by the power-cut drill)")
		return exitFailed
	}
	if err := crashfs.Serve(args[0], args[1], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitFailed
	}
	return exitOK
}

// crashFSCommandLine starts this binary as a crash filesystem server.
func crashFSCommandLine() ([]string, error) {
	etcd, err := linkedEtcdCommandLine()
	if err != nil {
		return nil, err
	}
	return []string{etcd[0], crashFSCommand}, nil
}
