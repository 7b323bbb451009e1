package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/finding"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// doctor runs `etcdmedic doctor -w json` against endpoints and returns its exit code and result.
func doctor(t *testing.T, endpoints []string, extra ...string) (int, doctorJSON) {
	t.Helper()
	args := append([]string{"doctor", "-w", "json", "--command-timeout", "3s", "--endpoints", strings.Join(endpoints, ",")}, extra...)
	code, out, errOut := runCLI(t, args...)
	var res doctorJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("doctor printed no JSON (exit %d): %v\nstdout: %s\nstderr: %s", code, err, out, errOut)
	}
	return code, res
}

// doctorJSON is the part of doctor's JSON the tests read.
type doctorJSON struct {
	ClusterID string `json:"clusterID"`
	Members   []struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		State string `json:"state"`
		Probe *struct {
			Reached bool `json:"reached"`
			Status  *struct {
				RaftIndex uint64 `json:"raftIndex"`
				Version   string `json:"version"`
			} `json:"status"`
		} `json:"probe"`
	} `json:"members"`
	Quorum struct {
		Voters, VotersUp, Unknown, Needed int
		InQuorum                          int `json:"votersInQuorum"`
		Proven                            bool
	} `json:"quorum"`
	Findings []finding.Finding `json:"findings"`
}

func (d doctorJSON) find(id string) *finding.Finding {
	for i := range d.Findings {
		if d.Findings[i].ID == id {
			return &d.Findings[i]
		}
	}
	return nil
}

func (d doctorJSON) ids() string {
	var ids []string
	for _, f := range d.Findings {
		ids = append(ids, string(f.Severity)+":"+f.ID+"("+f.Subject+")")
	}
	return strings.Join(ids, " ")
}

// wantFinding asserts the finding, its severity, and that it carries evidence and a remedy.
func wantDoctorFinding(t *testing.T, d doctorJSON, id string, sev finding.Severity) *finding.Finding {
	t.Helper()
	f := d.find(id)
	if f == nil || f.Severity != sev || f.Remedy == "" || f.Why == "" {
		t.Fatalf("want %s %s, got: %s", sev, id, d.ids())
	}
	return f
}

// waitDoctor re-runs doctor (bounded) until cond holds: conditions such as "no leader" take an
// election timeout to appear.
func waitDoctor(t *testing.T, endpoints []string, cond func(doctorJSON) bool, extra ...string) (int, doctorJSON) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, d := doctor(t, endpoints, extra...)
		if cond(d) {
			return code, d
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after 20 s; last findings: %s", d.ids())
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func TestDoctorHealthyClusterHasNoWarnings(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	code, d := doctor(t, []string{c.Member("m1").ClientURL})
	if code != exitOK || len(d.Findings) != 0 {
		t.Fatalf("healthy cluster: exit %d, findings %s", code, d.ids())
	}
	if len(d.Members) != 3 || d.Quorum.VotersUp != 3 {
		t.Fatalf("doctor should discover all 3 members from one endpoint: %+v", d.Quorum)
	}
	// The table: one row per member, and the verdict line.
	code, out, _ := runCLI(t, "doctor", "--endpoints", c.Member("m1").ClientURL)
	if code != exitOK || strings.Count(out, "3.7.") != 3 || !strings.Contains(out, "3 of 3 voters up") || !strings.Contains(out, "FINDINGS: none") {
		t.Fatalf("table output (exit %d):\n%s", code, out)
	}
}

// Review item 1: --no-discover probes one member of a healthy cluster; the two others are not
// probed, so they are neither down nor up, and m1's linearizable read proves a quorum.
func TestDoctorNoDiscoverIsNotQuorumLost(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	code, d := doctor(t, []string{c.Member("m1").ClientURL}, "--no-discover")
	if code != exitFindings || d.find(finding.IDQuorumLost) != nil || d.find(finding.IDQuorumAtRisk) != nil {
		t.Fatalf("healthy cluster, one endpoint, --no-discover: exit %d, %s", code, d.ids())
	}
	f := wantDoctorFinding(t, d, finding.IDQuorumNotVerified, finding.Warning)
	if !strings.Contains(f.Summary, "m2") || !strings.Contains(f.Summary, "m3") || !strings.Contains(f.Summary, "not probed") {
		t.Errorf("the warning must name the members not probed: %s", f.Summary)
	}
	if q := d.Quorum; q.Voters != 3 || q.VotersUp != 1 || q.InQuorum != 1 || q.Unknown != 2 || !q.Proven {
		t.Errorf("quorum %+v, want 1 of 3 up, 2 unknown, proven", q)
	}
	code, out, _ := runCLI(t, "doctor", "--no-discover", "--endpoints", c.Member("m1").ClientURL)
	if code != exitFindings || !strings.Contains(out, "1 of 3 voters up (2 needed), 2 not verified") || !strings.Contains(out, "not probed") {
		t.Errorf("table (exit %d):\n%s", code, out)
	}
}

// The runbook of incident 2: members drop out one by one.
func TestDoctorQuorumAtRiskThenLost(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	all := c.Endpoints()
	c.Member("m3").Kill()
	code, d := doctor(t, all)
	if code != exitCritical {
		t.Fatalf("one of three down: exit %d", code)
	}
	wantDoctorFinding(t, d, finding.IDQuorumAtRisk, finding.Critical)
	if f := wantDoctorFinding(t, d, finding.IDMemberUnreachable, finding.Warning); !strings.HasPrefix(f.Subject, "m3") {
		t.Errorf("unreachable member: %s", f.Subject)
	}

	c.Member("m2").Kill()
	code, d = waitDoctor(t, all, func(d doctorJSON) bool { return d.find(finding.IDNoLeader) != nil })
	if code != exitCritical {
		t.Fatalf("two of three down: exit %d", code)
	}
	wantDoctorFinding(t, d, finding.IDQuorumLost, finding.Critical)
	// etcdctl's --cluster forms print nothing now; doctor still shows the live member's status.
	for _, m := range d.Members {
		if m.Name == "m1" && (m.Probe == nil || !m.Probe.Reached || m.Probe.Status.RaftIndex == 0) {
			t.Errorf("m1's status is missing with quorum lost: %+v", m.Probe)
		}
	}
}

// Incident 1's ghost: a member added to the membership whose process never started.
func TestDoctorUnstartedMember(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var err error
	for i := 0; i < 60; i++ { // "unhealthy cluster" for ~5 s after start
		if _, err = cli.MemberAdd(ctx, []string{"http://127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), "unhealthy cluster") {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	code, d := doctor(t, []string{c.Member("m1").ClientURL})
	wantDoctorFinding(t, d, finding.IDMemberUnstarted, finding.Warning)
	// Four voters, three up: the ghost has eaten the cluster's fault tolerance.
	wantDoctorFinding(t, d, finding.IDQuorumAtRisk, finding.Critical)
	if code != exitCritical {
		t.Errorf("exit %d", code)
	}
}

// startForcedCopy starts a one-member cluster from a copy of a member's data dir with
// --force-new-cluster: same cluster ID and member ID, running on its own.
func startForcedCopy(t *testing.T, dataDir string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "copy.etcd")
	copyDir(t, dataDir, dir)
	ports := freePortsForTest(t, 2)
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	bin := etcdtest.Binary(t, etcdtest.Linked)
	cmd := bin.Command("--name", "copy", "--data-dir", dir, "--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--force-new-cluster")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if !waitServing(t, client) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the forced copy never answered on %s; its log ends:\n%s", client, lastLines(log.String(), 15))
	}
	return client
}

func waitServing(t *testing.T, endpoint string) bool {
	t.Helper()
	var last string
	for i := 0; i < 100; i++ {
		code, out, errOut := runCLI(t, "doctor", "--endpoints", endpoint, "--no-discover", "--command-timeout", "1s")
		if code != exitFailed {
			return true
		}
		last = errOut + out
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("last doctor answer from %s: %s", endpoint, last)
	return false
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// A removed member still running on its old data (pd-2 of incident 1), and an endpoint of
// another cluster in the list.
func TestDoctorStrangers(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	m3 := c.Member("m3")
	if err := m3.Stop(); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), "m3-old")
	copyDir(t, m3.DataDir, old)
	c.RemoveMember(t, m3)
	// The old m3 comes back forced into a cluster of its own. While it starts it dials its old
	// peers, which would tell it it was removed and stop it: keep them down for that moment.
	m1, m2 := c.Member("m1"), c.Member("m2")
	m1.Stop()
	m2.Stop()
	removed := startForcedCopy(t, old)
	for _, m := range []*etcdtest.Member{m1, m2} {
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []*etcdtest.Member{m1, m2} {
		if err := m.WaitReady(t.Context()); err != nil {
			t.Fatal(err)
		}
	}

	other := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	code, d := doctor(t, []string{c.Member("m1").ClientURL, removed, other.Member("m1").ClientURL})
	if code != exitCritical {
		t.Errorf("exit %d", code)
	}
	if f := wantDoctorFinding(t, d, finding.IDEndpointNotMember, finding.Warning); f.Subject != removed {
		t.Errorf("not-a-member finding is about %s, want %s", f.Subject, removed)
	}
	if f := wantDoctorFinding(t, d, finding.IDClusterIDMismatch, finding.Critical); f.Subject != other.Member("m1").ClientURL {
		t.Errorf("cluster ID finding is about %s", f.Subject)
	}
	if d.Quorum.Voters != 2 || d.Quorum.VotersUp != 2 {
		t.Errorf("strangers must not count as voters: %+v", d.Quorum)
	}
}

func TestDoctorLearners(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, ExtraFlags: []string{"--max-learners=2"}})
	c.AddMember(t, "l1", etcdtest.AddOptions{Learner: true})
	code, d := doctor(t, c.Endpoints())
	wantDoctorFinding(t, d, finding.IDLearnerNotPromoted, finding.Warning)
	if d.find(finding.IDTooManyLearners) != nil || code != exitFindings {
		t.Fatalf("one learner: exit %d, %s", code, d.ids())
	}
	// etcd refuses a learner the linearizable read: that is no network problem (review item 3).
	if d.find(finding.IDMemberCutOff) != nil {
		t.Errorf("a learner reported cut off: %s", d.ids())
	}
	c.AddMember(t, "l2", etcdtest.AddOptions{Learner: true})
	_, d = doctor(t, c.Endpoints())
	wantDoctorFinding(t, d, finding.IDTooManyLearners, finding.Warning)
	_, d = doctor(t, c.Endpoints(), "--max-learners", "2")
	if d.find(finding.IDTooManyLearners) != nil {
		t.Errorf("--max-learners 2 allows two: %s", d.ids())
	}
}

// Review item 8: an operator checks a freshly joined member by its own endpoint. etcd gives a
// learner no member list, so there is no membership to judge: exit 3 with one line saying so,
// not "FINDINGS: none" with the learner shown as not a member.
func TestDoctorOnlyALearnersEndpoint(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	l1 := c.AddMember(t, "l1", etcdtest.AddOptions{Learner: true})
	code, out, errOut := runCLI(t, "doctor", "--endpoints", l1.ClientURL, "--command-timeout", "3s")
	if code != exitFailed || out != "" || !strings.Contains(errOut, "is a learner") || !strings.Contains(errOut, "voter") || strings.Count(errOut, "Error:") != 1 {
		t.Fatalf("doctor on a learner's endpoint: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	code, d := doctor(t, []string{l1.ClientURL})
	if code != exitFailed || len(d.Members) != 0 || len(d.Findings) != 0 {
		t.Fatalf("-w json: exit %d, %d members, %s", code, len(d.Members), d.ids())
	}
	code, out, _ = runCLI(t, "doctor", "-w", "json", "--endpoints", l1.ClientURL, "--command-timeout", "3s")
	if code != exitFailed || !strings.Contains(out, `"strangers": []`) {
		t.Errorf("a learner must not be listed as a stranger: exit %d\n%s", code, out)
	}
}

func TestDoctorVersionSkew(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Versions: []string{etcdtest.V3_5_24, etcdtest.V3_5_24, etcdtest.V3_6}})
	code, d := doctor(t, c.Endpoints())
	f := wantDoctorFinding(t, d, finding.IDVersionSkew, finding.Warning)
	if !strings.Contains(f.Summary, "3.5.24") || !strings.Contains(f.Summary, "3.6.16") || code != exitFindings {
		t.Errorf("exit %d, %s", code, f.Summary)
	}
}

func TestDoctorSpaceQuotaAndDefrag(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, ExtraFlags: []string{"--quota-backend-bytes=" + fmt.Sprint(4<<20)}})
	cli := c.Client(t)
	// etcd refuses a write when the db size plus the request would pass the quota: with 64 KiB
	// values the refusal comes within 64 KiB of it (over 95%, the critical mark); with 256 KiB
	// ones it could come at 93%, and the finding was only a warning.
	value := strings.Repeat("x", 64<<10)
	for i := 0; i < 10; i++ { // deleted after the compaction below
		if _, err := cli.Put(t.Context(), fmt.Sprintf("small/%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	var lastErr error
	// The quota is checked against the backend size, which grows at each batch commit
	// (100 ms): keep writing, bounded, until etcd refuses.
	for i := 0; i < 1600 && lastErr == nil; i++ {
		_, lastErr = cli.Put(t.Context(), fmt.Sprintf("big/%d", i%64), value)
		time.Sleep(10 * time.Millisecond)
	}
	if lastErr == nil || !strings.Contains(lastErr.Error(), "database space exceeded") {
		t.Fatalf("want the quota hit, got %v", lastErr)
	}
	code, d := waitDoctor(t, c.Endpoints(), func(d doctorJSON) bool { return d.find(finding.IDAlarmNoSpace) != nil })
	wantDoctorFinding(t, d, finding.IDDBNearQuota, finding.Critical)
	if code != exitCritical {
		t.Errorf("exit %d", code)
	}

	// Free the space the way the remedy says, short of defragmenting: the db stays large.
	resp, err := cli.Delete(t.Context(), "big/", clientv3WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	// Physical: return once the compaction has freed its pages, not when it is scheduled.
	if _, err := cli.Compact(t.Context(), resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AlarmDisarm(t.Context(), allAlarms()); err != nil {
		t.Fatal(err)
	}
	// bbolt frees the compacted pages at a later commit, once no read holds them, and etcd
	// commits only when something changed: a live cluster writes again soon, and so does this
	// test, with deletes (a put is refused until the db is defragmented below its quota).
	for i := 0; i < 10; i++ {
		if _, err := cli.Delete(t.Context(), fmt.Sprintf("small/%d", i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	_, d = waitDoctor(t, c.Endpoints(), func(d doctorJSON) bool { return d.find(finding.IDDefragDue) != nil }, "--defrag-min-bytes", fmt.Sprint(1<<20))
	if d.find(finding.IDAlarmNoSpace) != nil {
		t.Errorf("alarm still reported after disarm: %s", d.ids())
	}
}

// Data that differs between members at the same revision: one member's db is edited while it
// is stopped (etcd's initial corruption check is off by default, so it starts anyway).
func TestDoctorHashMismatch(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	cli := c.Client(t)
	for i := 0; i < 20; i++ {
		if _, err := cli.Put(t.Context(), fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	code, d := doctor(t, c.Endpoints(), "--check-hash")
	if code != exitOK || d.find(finding.IDHashMismatch) != nil {
		t.Fatalf("identical members: exit %d, %s", code, d.ids())
	}
	m3 := c.Member("m3")
	if err := m3.Stop(); err != nil {
		t.Fatal(err)
	}
	corruptLastValue(t, filepath.Join(m3.DataDir, "member", "snap", "db"))
	if err := m3.Start(); err != nil {
		t.Fatal(err)
	}
	if err := m3.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	code, d = doctor(t, c.Endpoints(), "--check-hash")
	f := wantDoctorFinding(t, d, finding.IDHashMismatch, finding.Critical)
	if code != exitCritical || !strings.Contains(evidenceOf(f), "m3") {
		t.Errorf("exit %d, evidence %s", code, evidenceOf(f))
	}
}

func evidenceOf(f *finding.Finding) string {
	var parts []string
	for _, e := range f.Evidence {
		parts = append(parts, e.What+"="+e.Value)
	}
	return strings.Join(parts, "; ")
}

func TestDoctorWatchPrintsChanges(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	out := &outputWatch{want: "FINDINGS: none", seen: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		run([]string{"doctor", "--endpoints", strings.Join(c.Endpoints(), ","), "--command-timeout", "5s", "--watch", "400ms", "--watch-rounds", "8"}, out, io.Discard)
	}()
	// m3 dies once the first round has seen the cluster whole (under a loaded run a round can
	// take longer than a fixed wait).
	select {
	case <-out.seen:
	case <-done:
	case <-time.After(time.Minute):
	}
	c.Member("m3").Kill()
	<-done
	if got := out.String(); !strings.Contains(got, "FINDINGS: none") || !strings.Contains(got, "+ [CRITICAL] quorum-at-risk") || !strings.Contains(got, "member m3: up") {
		t.Fatalf("watch output:\n%s", got)
	}
}

// outputWatch is a command's standard output, safe to write from its goroutine, that closes
// seen once want has been written.
type outputWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *outputWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func (w *outputWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestDoctorNoEndpointReachable(t *testing.T) {
	t.Parallel()
	ports := freePortsForTest(t, 1)
	code, _, errOut := runCLI(t, "doctor", "--endpoints", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--command-timeout", "1s")
	if code != exitFailed || !strings.Contains(errOut, "no endpoint reachable") || !strings.Contains(errOut, "connection refused") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// A process that accepts TCP but never answers costs one timeout, not more.
	l := listenSilently(t)
	started := time.Now()
	code, _, errOut = runCLI(t, "doctor", "--endpoints", l, "--command-timeout", "1s")
	if took := time.Since(started); code != exitFailed || took > 3*time.Second {
		t.Fatalf("silent endpoint: exit %d after %s: %s", code, took, errOut)
	}
	_ = exec.ErrNotFound
}

// -w json keeps its documented shape when nothing answered: members is an array, never null
// (jq '.members[]' must not fail), and the exit code is still 3.
func TestDoctorJSONWhenNothingAnswers(t *testing.T) {
	t.Parallel()
	ports := freePortsForTest(t, 1)
	code, out, errOut := runCLI(t, "doctor", "-w", "json", "--endpoints", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--command-timeout", "1s")
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitFailed {
		t.Fatalf("exit %d, JSON error %v\nstdout %s\nstderr %s", code, err, out, errOut)
	}
	for _, key := range []string{"members", "strangers", "unmatched", "probes", "findings"} {
		if v := strings.TrimSpace(string(doc[key])); !strings.HasPrefix(v, "[") {
			t.Errorf("%q is %s, want an array", key, v)
		}
	}
}

// A CORRUPT alarm raised through the maintenance API, as etcd's corruption check raises it.
func TestDoctorCorruptAlarm(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	cli := c.Client(t)
	m2 := c.Member("m2")
	_, err := etcdserverpb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(t.Context(), &etcdserverpb.AlarmRequest{
		Action: etcdserverpb.AlarmRequest_ACTIVATE, MemberID: m2.ID, Alarm: etcdserverpb.AlarmType_CORRUPT,
	})
	if err != nil {
		t.Fatal(err)
	}
	code, d := waitDoctor(t, c.Endpoints(), func(d doctorJSON) bool { return d.find(finding.IDAlarmCorrupt) != nil })
	if f := wantDoctorFinding(t, d, finding.IDAlarmCorrupt, finding.Critical); !strings.HasPrefix(f.Subject, "m2") || code != exitCritical {
		t.Fatalf("exit %d, subject %s", code, f.Subject)
	}
}
