package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// manualScript is incident 2's manual recovery as an operator would script it with etcd's own
// tools, no backups. Each step prints "STEP <name> <unix time>" as it starts. Every loop is
// bounded.
var manualScript = template.Must(template.New("script").Parse(`#!/usr/bin/env bash
# Incident 2, the manual way: stop, pick the best member with etcdutl snapshot status, start it
# with --force-new-cluster, restart it without, then wipe, add as a learner, start, wait for and
# promote every other member; verify that every endpoint is healthy with equal hashkv.
set -u
ETCD={{.Etcd}}
ETCDCTL={{.Etcdctl}}
ETCDUTL={{.Etcdutl}}
NAMES=({{range .Members}}{{.Name}} {{end}})
DIRS=({{range .Dirs}}{{.}} {{end}})
PEERS=({{range .Members}}{{.PeerURL}} {{end}})
CLIENTS=({{range .Members}}{{.ClientURL}} {{end}})
FLAGS=({{range .Flags}}{{.}} {{end}})

step() { echo "STEP $1 $(date +%s.%N)"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
ctl() { "$ETCDCTL" --command-timeout=2s "$@"; }
start() { # start MEMBER_INDEX [FLAG...]
  local i=$1; shift
  setsid "$ETCD" --name "${NAMES[$i]}" --data-dir="${DIRS[$i]}" \
    --listen-client-urls "${CLIENTS[$i]}" --advertise-client-urls "${CLIENTS[$i]}" \
    --listen-peer-urls "${PEERS[$i]}" --initial-advertise-peer-urls "${PEERS[$i]}" \
    "${FLAGS[@]}" "$@" >>"${DIRS[$i]}.log" 2>&1 </dev/null &
}
stop() { # stop DATA_DIR
  pkill -TERM -f -- "--data-dir[= ]$1( |\$)" || true
  for n in $(seq 300); do
    pgrep -f -- "--data-dir[= ]$1( |\$)" >/dev/null || return 0
    sleep 0.1
  done
  fail "etcd on $1 did not stop"
}
wait_writes() { # wait_writes ENDPOINT
  for n in $(seq 600); do
    ctl --endpoints="$1" put bench/script "$n" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  fail "$1 serves no write"
}

step stop
for d in "${DIRS[@]}"; do stop "$d"; done

step pick
best=-1; bestrev=-1
for i in "${!NAMES[@]}"; do
  rev=$("$ETCDUTL" snapshot status "${DIRS[$i]}/member/snap/db" -w json 2>/dev/null | sed -n 's/.*"revision":\([0-9]*\).*/\1/p')
  if [ -n "$rev" ] && [ "$rev" -gt "$bestrev" ]; then best=$i; bestrev=$rev; fi
done
[ "$best" -ge 0 ] || fail "no readable db"
S=${CLIENTS[$best]}
echo "SURVIVOR ${NAMES[$best]} $bestrev"

step force-new-cluster
start "$best" --force-new-cluster
wait_writes "$S"

step restart-clean
stop "${DIRS[$best]}"
start "$best"
wait_writes "$S"

for i in "${!NAMES[@]}"; do
  [ "$i" = "$best" ] && continue
  step "rejoin:${NAMES[$i]}"
  rm -rf "${DIRS[$i]}"
  for n in $(seq 100); do
    addout=$(ctl --endpoints="$S" member add "${NAMES[$i]}" --learner --peer-urls="${PEERS[$i]}" 2>&1) && break
    # A try that timed out may have gone through: then the member is there, unstarted.
    ctl --endpoints="$S" member list | grep -qF ", ${PEERS[$i]}," && break
    [ "$n" = 100 ] && fail "member add: $addout"
    sleep 0.5 # "unhealthy cluster" right after a promote
  done
  # From the member list (etcdctl member add prints the same): its ID, and every member as
  # NAME=PEER_URL, the new one (not started, no name yet) under its own name.
  list=$(ctl --endpoints="$S" member list) || fail "member list"
  id=$(echo "$list" | grep -F ", ${PEERS[$i]}," | cut -d, -f1)
  ic=$(echo "$list" | awk -F', ' -v n="${NAMES[$i]}" -v p="${PEERS[$i]}" '{name=$3; if ($4==p) name=n; printf "%s%s=%s", sep, name, $4; sep=","}')
  [ -n "$id" ] || fail "${NAMES[$i]} is not in the member list after member add: $addout"
  start "$i" --initial-cluster="$ic" --initial-cluster-state=existing
  for n in $(seq 600); do # until it serves; a write unblocks a learner stalled on an idle cluster
    ctl --endpoints="${CLIENTS[$i]}" endpoint status >/dev/null 2>&1 && break
    [ "$n" = 600 ] && fail "${NAMES[$i]} does not serve"
    ctl --endpoints="$S" put bench/nudge "$n" >/dev/null 2>&1
    sleep 0.2
  done
  for n in $(seq 600); do
    promoteout=$(ctl --endpoints="$S" member promote "$id" 2>&1) && break
    [ "$n" = 600 ] && fail "${NAMES[$i]} cannot be promoted: $promoteout"
    sleep 0.2
  done
done

step verify
ALL=$(IFS=,; echo "${CLIENTS[*]}")
for n in $(seq 600); do
  if ctl --endpoints="$ALL" endpoint health >/dev/null 2>&1; then
    # under load each member is at its own newest revision: hash them all at one the cluster has
    rev=$(ctl --endpoints="$S" get bench/nudge -w json 2>/dev/null | grep -o '"revision":[0-9]*' | head -1 | cut -d: -f2)
    hashed=$(ctl --endpoints="$ALL" endpoint hashkv --rev="${rev:-0}" -w json 2>/dev/null | grep -o '"hash":[0-9]*')
    [ "$(echo "$hashed" | wc -l)" = "${#CLIENTS[@]}" ] && [ "$(echo "$hashed" | sort -u | wc -l)" = 1 ] && break
  fi
  [ "$n" = 600 ] && fail "not every endpoint is healthy with the same hashkv"
  sleep 0.2
done
step end
`))

// runScript writes the script for this run and runs it, returning its steps' durations.
func runScript(ctx context.Context, t tools, set *dataSet, dirs []string, runDir string) (steps []stepTime, err error) {
	var text bytes.Buffer
	if err := manualScript.Execute(&text, map[string]any{
		"Etcd": t.etcd, "Etcdctl": t.etcdctl, "Etcdutl": t.etcdutl,
		"Members": set.Members, "Dirs": dirs, "Flags": set.flags(),
	}); err != nil {
		return nil, err
	}
	path := filepath.Join(runDir, "manual-recovery.sh")
	if err := os.WriteFile(path, text.Bytes(), 0o755); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("the script failed: %v\n%s\n%s", err, out, stderr.String())
	}
	return parseSteps(out)
}

// parseSteps turns "STEP name time" lines into step durations (each ends where the next starts).
func parseSteps(out []byte) ([]stepTime, error) {
	type mark struct {
		name string
		at   float64
	}
	var marks []mark
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "STEP" {
			continue
		}
		at, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return nil, fmt.Errorf("bad step line %q", sc.Text())
		}
		marks = append(marks, mark{f[1], at})
	}
	if len(marks) < 2 || marks[len(marks)-1].name != "end" {
		return nil, fmt.Errorf("the script printed no complete set of steps:\n%s", out)
	}
	var steps []stepTime
	for i := 0; i+1 < len(marks); i++ {
		steps = append(steps, stepTime{marks[i].name, time.Duration((marks[i+1].at - marks[i].at) * float64(time.Second))})
	}
	return steps, nil
}
