// Command powercut runs the power-cut drill many times and reports, over every trial, what
// --force-new-cluster alone would have dropped against what etcdmedic lost: the benchmark of
// issue 11. Each trial: three members on crash filesystems under 8 writing clients, the whole
// cluster's power cut (unsynced writes dropped, the last one torn), the leader's and a
// follower's disks lost, recovery from the third with etcdmedic recover.
//
//	go run ./bench/powercut -trials 20
//
// It needs root and /dev/fuse (the crash filesystem is FUSE).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/etcdmedic/etcdmedic/drill"
)

func main() {
	trials := flag.Int("trials", 20, "power cuts to run")
	dir := flag.String("dir", "", "folder for the trials (default: a temporary one, removed afterwards)")
	verbose := flag.Bool("v", false, "print each drill's timeline")
	flag.Parse()
	log.SetFlags(log.Ltime)
	ctx := context.Background()
	if *dir == "" {
		d, err := os.MkdirTemp("", "etcdmedic-powercut-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	bin := filepath.Join(*dir, "etcdmedic")
	if b, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/etcdmedic").CombinedOutput(); err != nil {
		log.Fatalf("build etcdmedic (run from the repository root): %v\n%s", err, b)
	}
	d, _ := drill.Find("power-cut")
	var rows []*drill.Result
	for i := 1; i <= *trials; i++ {
		var out io.Writer = io.Discard
		if *verbose {
			out = os.Stderr
		}
		started := time.Now()
		r, err := drill.Run(ctx, d, drill.Env{Dir: filepath.Join(*dir, fmt.Sprintf("trial-%02d", i)), Command: []string{bin, "etcd"}, CrashFS: []string{bin, "internal-crashfs"}, Out: out})
		if err != nil {
			log.Printf("trial %d failed after %.0fs: %v", i, time.Since(started).Seconds(), err)
		} else {
			log.Printf("trial %d: %s", i, summary(r))
		}
		rows = append(rows, r)
		os.RemoveAll(filepath.Join(*dir, fmt.Sprintf("trial-%02d", i)))
	}
	report(os.Stdout, rows)
}

func summary(r *drill.Result) string {
	pc := r.PowerCut
	if pc == nil {
		return "no power cut"
	}
	return fmt.Sprintf("acked %d (%d on the survivor), runbook drops %d entries / %d acked, etcdmedic lost %d, tail %q",
		r.Acked, pc.AckedOnSurvivor, pc.EntriesRunbookDrops, pc.AckedRunbookDrops, r.Lost, pc.Tail)
}

func report(w io.Writer, rows []*drill.Result) {
	fmt.Fprintln(w, "| trial | acked | on survivor | only on lost disks | survivor: last / commit / db index | tail | runbook drops: entries / acked | etcdmedic lost | repair |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---|---|---:|---:|---:|")
	var acked, held, lostDisks, runbookEntries, runbookAcked, lost, torn, behind, passed, cutsWithTail int
	for i, r := range rows {
		pc := r.PowerCut
		if pc == nil {
			fmt.Fprintf(w, "| %d | failed before the cut | | | | | | | |\n", i+1)
			continue
		}
		tail := pc.Tail
		if tail == "" {
			tail = "clean"
		} else {
			cutsWithTail++
		}
		if pc.Tail == "torn-write" || pc.Tail == "truncated" {
			torn++
		}
		if pc.ConsistentIndex < pc.Commit {
			behind++
		}
		fmt.Fprintf(w, "| %d | %d | %d | %d | %d / %d / %d | %s | %d / %d | %d | %.1f s |\n", i+1, r.Acked, pc.AckedOnSurvivor, pc.AckedLostWithDisks,
			pc.LastIndex, pc.Commit, pc.ConsistentIndex, tail, pc.EntriesRunbookDrops, pc.AckedRunbookDrops, r.Lost, r.RepairSec)
		acked += r.Acked
		held += pc.AckedOnSurvivor
		lostDisks += pc.AckedLostWithDisks
		runbookEntries += int(pc.EntriesRunbookDrops)
		runbookAcked += pc.AckedRunbookDrops
		lost += r.Lost
		if r.Passed {
			passed++
		}
	}
	fmt.Fprintf(w, "\n%d trials, %d passed. Acknowledged writes: %d, %d on the surviving disk, %d only on the two lost disks.\n", len(rows), passed, acked, held, lostDisks)
	fmt.Fprintf(w, "--force-new-cluster alone would have dropped %d entries holding %d acknowledged writes; etcdmedic lost %d.\n", runbookEntries, runbookAcked, lost)
	fmt.Fprintf(w, "The survivor's WAL ended torn in %d trials (a tail of any kind in %d); its db was behind its commit index in %d.\n", torn, cutsWithTail, behind)
}
