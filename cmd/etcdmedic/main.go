// Command etcdmedic detects, prevents and repairs the membership failures that take etcd
// clusters down, and proves each repair against real etcd.
package main

import (
	"os"
)

func main() {
	// The hidden "etcd" command must see its arguments untouched by cobra: it is etcd itself.
	if len(os.Args) > 1 && os.Args[1] == linkedEtcdCommand {
		runLinkedEtcd(os.Args[2:])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == crashFSCommand {
		os.Exit(runCrashFS(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
