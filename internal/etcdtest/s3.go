package etcdtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
)

// S3 is a real S3 server: SeaweedFS's weed server (master, volume, filer and S3 gateway in one
// process) on 127.0.0.1 with free ports, anonymous access, and one bucket.
type S3 struct {
	Endpoint string // http://127.0.0.1:PORT
	Bucket   string
	dir, log string
	args     []string
	cmd      *exec.Cmd
	// sockets are the Unix sockets weed makes in /tmp, whatever TMPDIR says, named after its
	// ports (claimed by this process, so the names are this server's alone).
	sockets []string
}

// URL is the store URL of prefix in the bucket, as etcdmedic's --store takes it.
func (s *S3) URL(prefix string) string {
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&region=us-east-1&use_path_style=true&anonymous=true", s.Bucket, prefix, s.Endpoint)
}

// StartS3 starts a SeaweedFS S3 server for one test (built and cached like etcd) with a bucket;
// it stops when the test ends.
func StartS3(t testing.TB) *S3 {
	t.Helper()
	s, err := NewS3(t.TempDir())
	if s != nil {
		t.Cleanup(s.Stop)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// NewS3 starts a SeaweedFS S3 server keeping its data in dir, and creates a bucket; the
// caller stops it. Benchmarks use it as tests do.
func NewS3(dir string) (*S3, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), binaryBuildTimeout)
	defer cancel()
	bin, err := etcdbin.WeedPath(ctx, etcdbin.SeaweedFSVersion)
	if err != nil {
		return nil, fmt.Errorf("build SeaweedFS: %w", err)
	}
	ports, err := freePorts(8)
	if err != nil {
		return nil, err
	}
	s := &S3{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", ports[6]), Bucket: "etcd-backups", dir: dir, log: filepath.Join(dir, "weed.log")}
	s.args = []string{bin, "server", "-dir=" + dir, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		fmt.Sprintf("-master.port=%d", ports[0]), fmt.Sprintf("-master.port.grpc=%d", ports[1]),
		fmt.Sprintf("-volume.port=%d", ports[2]), fmt.Sprintf("-volume.port.grpc=%d", ports[3]),
		"-filer", fmt.Sprintf("-filer.port=%d", ports[4]), fmt.Sprintf("-filer.port.grpc=%d", ports[5]),
		"-s3", fmt.Sprintf("-s3.port=%d", ports[6]), fmt.Sprintf("-s3.port.grpc=%d", ports[7]),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-metricsPort=0", "-master.volumeSizeLimitMB=1024",
		"-volume.max=100"} // volumes are sparse: a cap, not space taken (the default, 8, stopped a 1 GiB benchmark at 8 GiB)
	s.sockets = []string{
		fmt.Sprintf("/tmp/seaweedfs-master-grpc-%d.sock", ports[1]), fmt.Sprintf("/tmp/seaweedfs-volume-grpc-%d.sock", ports[3]),
		fmt.Sprintf("/tmp/seaweedfs-filer-grpc-%d.sock", ports[5]), fmt.Sprintf("/tmp/seaweedfs-s3-grpc-%d.sock", ports[7]),
		fmt.Sprintf("/tmp/seaweedfs-filer-%d.sock", ports[4]), fmt.Sprintf("/tmp/seaweedfs-s3-%d.sock", ports[6]),
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	if err := s.WaitReady(); err != nil {
		return s, err
	}
	return s, nil
}

// Start starts the server (again, after Stop: its data is kept).
func (s *S3) Start() error {
	log, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.args[0], s.args[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = s.dir, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start SeaweedFS: %w", err)
	}
	go func() { cmd.Wait(); log.Close() }()
	s.cmd = cmd
	return nil
}

// Stop kills the server (the store is down until Start) and removes the sockets it made in
// /tmp (Start makes them again).
func (s *S3) Stop() {
	if s.cmd != nil {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		for i := 0; i < 100 && syscall.Kill(s.cmd.Process.Pid, 0) == nil; i++ {
			time.Sleep(50 * time.Millisecond)
		}
		s.cmd = nil
	}
	for _, sock := range s.sockets {
		os.Remove(sock)
	}
}

// WaitReady waits until the S3 gateway serves the bucket, creating it (PUT /bucket), while
// the server starts (about 4 s).
func (s *S3) WaitReady() error {
	var last string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodPut, s.Endpoint+"/"+s.Bucket, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err.Error()
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusConflict {
			return nil
		}
		last = resp.Status
	}
	b, _ := os.ReadFile(s.log)
	return fmt.Errorf("SeaweedFS S3 at %s did not serve bucket %s within 60 s: %s\n%s", s.Endpoint, s.Bucket, last, tailLines(string(b), 20))
}

// StartOn runs etcd of version on an existing data dir (a restored one) as member name, on
// free ports of 127.0.0.1, until the test ends, and returns a client once it serves.
func StartOn(t testing.TB, version, name, dataDir string) *clientv3.Client {
	t.Helper()
	ports, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	client, peer := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	log, err := os.Create(dataDir + ".log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Binary(t, version).Path, "--name", name, "--data-dir", dataDir,
		"--listen-client-urls", client, "--advertise-client-urls", client, "--listen-peer-urls", peer)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		log.Close()
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Get(ctx, "etcdtest/ready")
		cancel()
		if err == nil {
			return cli
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(dataDir + ".log")
			t.Fatalf("etcd %s on %s did not serve within 30 s: %v\n%s", version, dataDir, err, tailLines(string(b), 20))
		}
	}
}
