package sandbox

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// A learner whose etcd has died never catches up: Promote says so at once, with the learner's
// log, instead of retrying "not in sync with leader" until its timeout (the upgrade drill once
// spent its 2 minutes that way, and said only etcd's refusal).
func TestALearnerThatDiedFailsPromoteAtOnce(t *testing.T) {
	t.Parallel()
	sb := upOneMember(t)
	m, err := sb.AddMember(t.Context(), true)
	if err != nil {
		t.Fatalf("AddMember: %v", err)
	}
	if err := syscall.Kill(m.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100 && !m.Exited(); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	err = sb.Promote(t.Context(), m.Name, 2*time.Minute)
	if err == nil || !strings.Contains(err.Error(), "member m2 exited before it was promoted") || !strings.Contains(err.Error(), m.LogFile) {
		t.Fatalf("Promote of a dead learner: %v", err)
	}
}

// A new member whose etcd exits before it serves (here it is given a flag its etcd does not
// know) fails AddMember at once, with its log's last lines; it stays in the sandbox, so that
// sandbox down still finds it.
func TestANewMemberThatExitsFailsAddMemberAtOnce(t *testing.T) {
	t.Parallel()
	sb := upOneMember(t)
	sb.Command = append(append([]string{}, sb.Command...), "--no-such-flag")
	_, err := sb.AddMember(t.Context(), true)
	if err == nil || !strings.Contains(err.Error(), "member m2 exited before it served") || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("AddMember with a member that cannot start: %v", err)
	}
	if len(sb.Members) != 2 {
		t.Fatalf("the sandbox should keep the member it added: %+v", sb.Members)
	}
	// A second member add of its peer URL (a first one that went through after its timeout)
	// finds it there, added and never started; the started member is not taken for it.
	cli, err := sb.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if !addedUnstarted(t.Context(), cli, sb.Members[1].PeerURL) || addedUnstarted(t.Context(), cli, sb.Members[0].PeerURL) {
		t.Fatalf("addedUnstarted should find m2 (%s) only", sb.Members[1].PeerURL)
	}
}

// upOneMember starts a 1-member sandbox of etcd v3.6, taken down when the test ends.
func upOneMember(t *testing.T) *Sandbox {
	t.Helper()
	sb, err := Up(t.Context(), Options{Dir: filepath.Join(t.TempDir(), "sb"), Members: 1, Command: []string{etcdtest.Binary(t, etcdtest.V3_6).Path}})
	if sb != nil {
		t.Cleanup(func() { sb.Down(5 * time.Second) })
	}
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	return sb
}
