package archive_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/archive"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/store"
)

// backupOf takes a full backup of a one-member cluster of version with n keys into a file://
// store.
func backupOf(t *testing.T, version string, n int) (*store.Store, string, *archive.Full) {
	t.Helper()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: version})
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for i := 0; i < n; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("/registry/configmaps/default/cm-%04d", i), fmt.Sprintf("value %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	st, err := store.Open(ctx, "file://"+dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	conn := cluster.DefaultConn()
	conn.Endpoints = []string{c.Members()[0].ClientURL}
	f, err := archive.TakeFull(ctx, conn, st, archive.TakeOptions{Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return st, dir, f
}

func verifyOptions(t *testing.T) archive.VerifyOptions {
	etcdutl, err := etcdbin.EtcdutlPath(t.Context(), etcdtest.V3_6)
	if err != nil {
		t.Fatal(err)
	}
	return archive.VerifyOptions{Etcd: []string{etcdtest.Binary(t, etcdtest.V3_6).Path}, Etcdutl: []string{etcdutl}, Scratch: t.TempDir()}
}

// The runbook's backup: taken, listed unverified, restored into a scratch member whose hash at
// the backup's revision equals the cluster's, then listed verified. A backup taken on v3.5
// restores into v3.6 the same way.
func TestABackupIsListedOnceVerifiedByRestoringIt(t *testing.T) {
	t.Parallel()
	for _, version := range []string{etcdtest.V3_6, etcdtest.V3_5_24} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			st, _, f := backupOf(t, version, 200)
			if f.Revision < 201 || f.HashKV == 0 || f.Data.SHA256 == "" {
				t.Fatalf("backup %+v", f)
			}
			entries, err := archive.List(t.Context(), st)
			if err != nil || len(entries) != 1 || entries[0].State() != "unverified" {
				t.Fatalf("listed %+v (%v)", entries, err)
			}
			v, err := archive.Verify(t.Context(), st, f, verifyOptions(t))
			if err != nil || v.Result != "verified" {
				t.Fatalf("verify a backup taken on %s, restored into v3.6: %+v %v", version, v, err)
			}
			entries, _ = archive.List(t.Context(), st)
			if entries[0].State() != "verified" {
				t.Errorf("after verify: %s", entries[0].State())
			}
		})
	}
}

// A damaged object in the store is caught by verify (and by every download), and a snapshot
// uploaded without its manifest (a backup killed mid-upload) is not a backup.
func TestDamagedAndHalfUploadedBackups(t *testing.T) {
	t.Parallel()
	st, dir, f := backupOf(t, etcdtest.V3_6, 50)
	// A second snapshot whose manifest never made it (the process killed between the two).
	if _, err := st.Put(t.Context(), "full/20991231T000000.000Z-r000000000999.db", strings.NewReader("a snapshot's bytes")); err != nil {
		t.Fatal(err)
	}
	entries, err := archive.List(t.Context(), st)
	if err != nil || len(entries) != 1 || entries[0].ID != f.ID {
		t.Fatalf("listed %+v (%v): want only the backup with a manifest", entries, err)
	}
	data := filepath.Join(dir, f.DataKey())
	b, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(data, b, 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := archive.Verify(t.Context(), st, f, verifyOptions(t))
	if err != nil || v.Result != "failed" {
		t.Fatalf("verify of a damaged object: %+v %v", v, err)
	}
	t.Logf("caught: %s", v.Why)
	if entries, _ := archive.List(t.Context(), st); entries[0].State() != "failed" {
		t.Errorf("listed %s after a failed verification", entries[0].State())
	}
}

// The same backup through a real S3 server (SeaweedFS), encrypted with age: taken, listed,
// verified by a restore. With the server down, backup now fails and lists nothing; back up,
// the next one goes through and both lists and verifications are whole.
func TestBackupsInARealS3Server(t *testing.T) {
	t.Parallel()
	s3 := etcdtest.StartS3(t)
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_6})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cli := c.Client(t)
	for i := 0; i < 100; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("k%03d", i), strings.Repeat("v", 1000)); err != nil {
			t.Fatal(err)
		}
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	idFile := filepath.Join(t.TempDir(), "age.key")
	os.WriteFile(idFile, []byte(id.String()+"\n"), 0o600)
	st, err := store.Open(ctx, s3.URL("cluster-a"), store.Options{Recipients: []string{id.Recipient().String()}, IdentityFile: idFile})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	conn := cluster.DefaultConn()
	conn.Endpoints = []string{c.Members()[0].ClientURL}
	f, err := archive.TakeFull(ctx, conn, st, archive.TakeOptions{Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Data.Encrypted || f.Data.StoredBytes >= f.Data.Bytes {
		t.Errorf("stored %+v: want encrypted and compressed", f.Data)
	}
	if v, err := archive.Verify(ctx, st, f, verifyOptions(t)); err != nil || v.Result != "verified" {
		t.Fatalf("verify through S3: %+v %v", v, err)
	}

	s3.Stop()
	short, cancelShort := context.WithTimeout(ctx, 15*time.Second)
	if _, err := archive.TakeFull(short, conn, st, archive.TakeOptions{Scratch: t.TempDir()}); err == nil {
		t.Fatal("a backup went through with the store down")
	}
	cancelShort()
	if err := s3.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s3.WaitReady(); err != nil {
		t.Fatal(err)
	}
	if _, err := archive.TakeFull(ctx, conn, st, archive.TakeOptions{Scratch: t.TempDir()}); err != nil {
		t.Fatalf("once the store is back: %v", err)
	}
	entries, err := archive.List(ctx, st)
	if err != nil || len(entries) != 2 || entries[0].State() != "verified" || entries[1].State() != "unverified" {
		t.Fatalf("after the outage the store lists %+v (%v): want the verified backup and the new one", entries, err)
	}
}

// The store down for 30 s under write load: the capture keeps what it receives, retries, and
// stores it once the store is back; a restore then has every write.
func TestCaptureRidesOutAStoreOutage(t *testing.T) {
	t.Parallel()
	s3 := etcdtest.StartS3(t)
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_6})
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, s3.URL("outage"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	conn := cluster.DefaultConn()
	conn.Endpoints = []string{c.Members()[0].ClientURL}
	full, err := archive.TakeFull(ctx, conn, st, archive.TakeOptions{Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var stored atomic.Int64
	cctx, stopCapture := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		archive.Capture(cctx, cli, st, full.Generation, full.Revision, 500*time.Millisecond, func(s archive.Segment, _ time.Time) { stored.Store(s.To) })
	}()
	var last int64
	write := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			resp, err := cli.Put(ctx, fmt.Sprintf("k%d", last), "v")
			if err != nil {
				t.Fatal(err)
			}
			last = resp.Header.Revision
		}
	}
	write(3 * time.Second)
	s3.Stop()
	write(30 * time.Second) // the store is down: the capture keeps what it receives
	if got := stored.Load(); got >= last {
		t.Fatalf("stored up to %d with the store down", got)
	}
	if err := s3.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s3.WaitReady(); err != nil {
		t.Fatal(err)
	}
	write(2 * time.Second)
	for i := 0; i < 900 && stored.Load() < last; i++ { // the backoff reaches 32 s during the outage
		time.Sleep(100 * time.Millisecond)
	}
	stopCapture()
	<-done
	if got := stored.Load(); got < last {
		t.Fatalf("after the outage the store holds history up to %d, the last write is at %d", got, last)
	}
	p, err := archive.Choose(ctx, st, 0, time.Time{})
	if err != nil || p.Revision < last {
		t.Fatalf("a restore reaches %v (%v), the last write is at %d", p, err, last)
	}
	t.Logf("%d revisions written across a 30 s outage of the store, all stored once it was back", last-full.Revision)
}

// etcd's hash of the key space depends on how far the member has compacted. A member that
// compacts between the snapshot and its hash (Kubernetes compacts every 5 minutes) gave a hash
// the restored snapshot cannot match as it is: verify compacts the restored member as far as
// the member had, so that a whole backup is not recorded as failed.
func TestVerifyComparesHashesAtTheMembersCompaction(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_6})
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for round := 0; round < 2; round++ { // every key twice: a compaction drops the first values
		for i := 0; i < 100; i++ {
			if _, err := cli.Put(ctx, fmt.Sprintf("/registry/leases/kube-system/l-%03d", i), fmt.Sprintf("renewed %d", round)); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := store.Open(ctx, "file://"+t.TempDir(), store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	conn := cluster.DefaultConn()
	endpoint := c.Members()[0].ClientURL
	conn.Endpoints = []string{endpoint}
	f, err := archive.TakeFull(ctx, conn, st, archive.TakeOptions{Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// The member compacts, then hashes: what TakeFull records when the two race.
	if _, err := cli.Compact(ctx, f.Revision-50, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	live, err := cli.HashKV(ctx, endpoint, f.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if live.Hash == f.HashKV {
		t.Fatalf("the compaction did not change the hash at revision %d: the test proves nothing", f.Revision)
	}
	f.HashKV, f.HashCompactRevision = live.Hash, live.CompactRevision
	if err := st.PutJSON(ctx, "full/"+f.ID+".json", f); err != nil {
		t.Fatal(err)
	}
	v, err := archive.Verify(ctx, st, f, verifyOptions(t))
	if err != nil || v.Result != "verified" {
		t.Fatalf("verify a backup hashed after a compaction to %d: %+v %v", live.CompactRevision, v, err)
	}
}

// A cluster with auth enabled (etcdctl auth enable): its backups' snapshots carry auth on, so
// the member a verification or a replay restores answers only the backup's own users. Without
// one, verify says so and records nothing (a good backup is never listed failed); with root's
// password, the backup verifies and its point in time replays.
func TestBackupsOfAClusterWithAuthEnabled(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.V3_6})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	admin := c.Client(t)
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "s3cret"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	endpoint := c.Members()[0].ClientURL
	conn := cluster.DefaultConn()
	conn.Endpoints, conn.User, conn.Password = []string{endpoint}, "root", "s3cret"
	cli, err := conn.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	put := func(n int) {
		for i := 0; i < n; i++ {
			if _, err := cli.Put(ctx, fmt.Sprintf("/registry/secrets/default/s-%03d", i), "v"); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(50)
	st, err := store.Open(ctx, "file://"+t.TempDir(), store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f, err := archive.TakeFull(ctx, conn, st, archive.TakeOptions{Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !f.AuthEnabled {
		t.Fatalf("the manifest of a backup taken with auth on says authEnabled false: %+v", f)
	}
	opts := verifyOptions(t)
	if v, err := archive.Verify(ctx, st, f, opts); err == nil || !strings.Contains(err.Error(), "auth enabled") {
		t.Fatalf("verify without a user: %+v %v, want an error that asks for one", v, err)
	}
	if entries, _ := archive.List(ctx, st); len(entries) != 1 || entries[0].State() != "unverified" {
		t.Fatalf("after a verification that could not run the store lists %+v, want it unverified", entries)
	}
	opts.Credentials = archive.Credentials{User: "root", Password: "s3cret"}
	if v, err := archive.Verify(ctx, st, f, opts); err != nil || v.Result != "verified" {
		t.Fatalf("verify as root: %+v %v", v, err)
	}
	cctx, stopCapture := context.WithCancel(ctx)
	done := make(chan struct{})
	var stored atomic.Int64
	go func() {
		defer close(done)
		archive.Capture(cctx, cli, st, f.Generation, f.Revision, 200*time.Millisecond, func(s archive.Segment, _ time.Time) { stored.Store(s.To) })
	}()
	put(30)
	last, err := cli.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300 && stored.Load() < last.Header.Revision; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	stopCapture()
	<-done
	v, err := archive.VerifyPoint(ctx, st, cli, endpoint, opts)
	if err != nil || v.Result != "verified" || v.Replayed < 30 {
		t.Fatalf("verify the point (history replayed as root): %+v %v", v, err)
	}
}

// A restore of three members that fails on one (its disk full) changes no data dir: every
// member is restored aside first and moved into place only once all are, so running it again,
// once there is room, restores them all.
func TestARestoreThatFailsOnOneMemberChangesNoDataDir(t *testing.T) {
	t.Parallel()
	st, _, f := backupOf(t, etcdtest.V3_6, 50)
	ctx := t.Context()
	p, err := archive.Choose(ctx, st, 0, time.Time{})
	if err != nil || p.Full.ID != f.ID {
		t.Fatalf("chose %+v (%v)", p, err)
	}
	root := t.TempDir()
	full := filepath.Join(root, "m3")
	if err := os.MkdirAll(full, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", full, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("a small filesystem is needed (tmpfs mount as root): %v", err)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			syscall.Unmount(full, syscall.MNT_DETACH)
		}
	})
	var targets []archive.Target
	for i, name := range []string{"m1", "m2", "m3"} {
		targets = append(targets, archive.Target{Name: name, DataDir: filepath.Join(root, name), PeerURL: fmt.Sprintf("http://127.0.0.1:%d", 2380+i)})
	}
	opts := archive.RestoreOptions{Etcdutl: verifyOptions(t).Etcdutl, Scratch: t.TempDir()}
	if _, err := archive.Restore(ctx, st, p, targets, opts); err == nil {
		t.Fatal("a restore with m3's data dir on a 1 MiB disk went through")
	} else {
		t.Logf("refused: %v", err)
	}
	for _, tg := range targets {
		if ents, _ := os.ReadDir(tg.DataDir); len(ents) > 0 {
			t.Fatalf("after the failed restore %s holds %v: want it as it was", tg.DataDir, ents)
		}
	}
	syscall.Unmount(full, syscall.MNT_DETACH)
	mounted = false
	res, err := archive.Restore(ctx, st, p, targets, opts)
	if err != nil {
		t.Fatalf("the same restore again, with room: %v", err)
	}
	for _, dir := range res.DataDirs {
		ents, _ := os.ReadDir(dir)
		if len(ents) != 1 || ents[0].Name() != "member" {
			t.Fatalf("%s holds %v after the restore, want its member folder only", dir, ents)
		}
	}
}

// A verification that cannot finish says nothing about the backup: asked to stop (SIGTERM, a
// deadline) while the restored member is still loading, it records nothing, and the backup
// stays usable. A restored member that does not hold the revision its manifest records fails
// at once, with that said; one whose etcd exits on the data fails with its last words.
func TestAVerificationThatCouldNotFinishSaysNothingAboutTheBackup(t *testing.T) {
	t.Parallel()
	st, _, f := backupOf(t, etcdtest.V3_6, 20)
	state := func() string {
		entries, err := archive.List(t.Context(), st)
		if err != nil || len(entries) != 1 {
			t.Fatalf("listed %+v (%v)", entries, err)
		}
		return entries[0].State()
	}

	// An etcd that takes its time, like one opening an 8 GiB db on a busy node.
	slow := verifyOptions(t)
	slow.Etcd = []string{"sh", "-c", "exec sleep 60", "etcd"}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if v, err := archive.Verify(ctx, st, f, slow); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("verify asked to stop while the member loaded: %+v, %v: want the deadline as an error", v, err)
	}
	if got := state(); got != "unverified" {
		t.Fatalf("after a verification asked to stop the backup is listed %s: want unverified", got)
	}

	refusing := verifyOptions(t)
	refusing.Etcd = []string{"sh", "-c", "echo 'member has already been bootstrapped' >&2; exit 1", "etcd"}
	v, err := archive.Verify(t.Context(), st, f, refusing)
	if err != nil || v.Result != "failed" || !strings.Contains(v.Why, "exited") || !strings.Contains(v.Why, "already been bootstrapped") {
		t.Fatalf("verify with an etcd that exits on the data: %+v, %v: want failed, with its last log line", v, err)
	}

	beyond := *f
	beyond.Revision += 1000
	start := time.Now()
	v, err = archive.Verify(t.Context(), st, &beyond, verifyOptions(t))
	if err != nil || v.Result != "failed" || !strings.Contains(v.Why, fmt.Sprintf("does not hold revision %d", beyond.Revision)) {
		t.Fatalf("verify of a manifest claiming revision %d: %+v, %v: want failed, saying so", beyond.Revision, v, err)
	}
	t.Logf("failed in %s: %s", time.Since(start).Round(time.Millisecond), v.Why)
}
