package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcdmedic/etcdmedic/kubeapi"
	etcdruntime "github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// Kubernetes is the sandbox's control plane: a kube-apiserver beside each member, on that
// member alone (kubeadm's --etcd-servers=https://127.0.0.1:2379 on each master).
type Kubernetes struct {
	Binary      string              `json:"binary"`
	Credentials kubeapi.Credentials `json:"credentials"`
	Kubeconfig  string              `json:"kubeconfig"`
	APIServers  []kubeapi.Server    `json:"apiservers"`
}

// StartKubernetes starts a kube-apiserver (binary) beside every member, writes a kubeconfig
// with a context per member into the sandbox dir, and waits until every apiserver is ready. An
// apiserver that finds its port taken (by a process that listened on it between the choice and
// the bind) is started again on another; one that gave up its first repair of the service IPs
// (see startUpRace) is started again on its own, as kubelet would; one that exits otherwise is
// not waited for until the timeout, and its error carries its log's last lines.
func (sb *Sandbox) StartKubernetes(ctx context.Context, binary string, timeout time.Duration) error {
	if sb.Kubernetes != nil {
		return errors.New("the sandbox runs Kubernetes already")
	}
	dir := filepath.Join(sb.Dir, "kubernetes")
	creds, err := kubeapi.NewCredentials(dir)
	if err != nil {
		return fmt.Errorf("kubernetes credentials: %w", err)
	}
	ports, err := freePorts(len(sb.Members))
	if err != nil {
		return err
	}
	k := &Kubernetes{Binary: binary, Credentials: *creds, Kubeconfig: filepath.Join(sb.Dir, "kubeconfig")}
	for i, m := range sb.Members {
		k.APIServers = append(k.APIServers, kubeapi.Server{
			Name:        m.Name,
			URL:         fmt.Sprintf("https://127.0.0.1:%d", ports[i]),
			Port:        ports[i],
			EtcdServers: []string{m.ClientURL},
			CertDir:     filepath.Join(dir, m.Name),
			LogFile:     filepath.Join(sb.Dir, m.Name+"-apiserver.log"),
		})
	}
	sb.Kubernetes = k
	for i := range k.APIServers {
		err := sb.startAPIServer(&k.APIServers[i])
		if err == nil {
			err = sb.save() // recorded at once: sandbox down stops what sandbox.json names
		}
		if err != nil {
			// None of the apiservers already started is left running and unrecorded.
			if serr := sb.stopKubernetes(5 * time.Second); serr != nil {
				return fmt.Errorf("%w; stopping the apiservers already started: %v (sandbox down --dir %s stops them)", err, serr, sb.Dir)
			}
			return err
		}
	}
	if err := sb.saveKubernetes(); err != nil {
		return err
	}
	_, err = sb.waitKubernetesReady(ctx, timeout, true)
	return err
}

// stopKubernetes stops every apiserver StartKubernetes started and forgets them, after a
// failed start. One that cannot be stopped stays recorded, for sandbox down.
func (sb *Sandbox) stopKubernetes(grace time.Duration) error {
	var errs []error
	for i := range sb.Kubernetes.APIServers {
		errs = append(errs, sb.stopAPIServer(&sb.Kubernetes.APIServers[i], grace))
	}
	if err := errors.Join(errs...); err != nil {
		return errors.Join(err, sb.save())
	}
	sb.Kubernetes = nil
	return sb.save()
}

func (sb *Sandbox) saveKubernetes() error {
	if err := sb.save(); err != nil {
		return err
	}
	return kubeapi.WriteKubeconfig(sb.Kubernetes.Kubeconfig, sb.Kubernetes.APIServers, &sb.Kubernetes.Credentials)
}

// WaitKubernetesReady waits until every apiserver is ready, and returns when each was. One
// that gave up its first repair of the service IPs is started again on its port; one that exits
// otherwise is not waited for until the timeout: its error carries its log's last lines.
func (sb *Sandbox) WaitKubernetesReady(ctx context.Context, timeout time.Duration) (map[string]time.Time, error) {
	return sb.waitKubernetesReady(ctx, timeout, false)
}

// waitKubernetesReady is WaitKubernetesReady; with movePorts, an apiserver that exited because
// its port was taken is started again on another one (only before anything has used its URL),
// and the sandbox's state and kubeconfig are written again at once.
func (sb *Sandbox) waitKubernetesReady(ctx context.Context, timeout time.Duration, movePorts bool) (map[string]time.Time, error) {
	if sb.Kubernetes == nil {
		return nil, errors.New("the sandbox runs no Kubernetes")
	}
	servers := sb.Kubernetes.APIServers
	readyAt := make([]time.Time, len(servers))
	errs := make([]error, len(servers))
	var restarting sync.Mutex // one apiserver started again, and the state written, at a time
	var wg sync.WaitGroup
	for i := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &servers[i]
			startAgain := func(why exitCause) error {
				restarting.Lock()
				defer restarting.Unlock()
				switch why {
				case portTaken:
					if !movePorts {
						return errors.New("its URL may be in use: not moved")
					}
					if err := sb.moveAPIServer(s); err != nil {
						return err
					}
				case startUpRace:
					if err := sb.restartAPIServer(s); err != nil {
						return err
					}
				}
				return sb.saveKubernetes() // the ports and pids of the apiservers
			}
			if errs[i] = sb.waitAPIServer(ctx, s, timeout, startAgain); errs[i] == nil {
				readyAt[i] = time.Now()
			}
		}()
	}
	wg.Wait()
	ready := map[string]time.Time{}
	for i, s := range servers {
		if !readyAt[i].IsZero() {
			ready[s.Name] = readyAt[i]
		}
	}
	return ready, errors.Join(errs...)
}

// apiServerStartTries bounds how often one apiserver is started again, for each exitCause.
const apiServerStartTries = 3

// exitCause is why an apiserver that exited before it was ready is started again.
type exitCause int

const (
	exitedForGood exitCause = iota
	// portTaken: another process listened on its port between the choice and the bind. It is
	// started again on another port.
	portTaken
	// startUpRace: its first repair of the service IPs failed and it gave up after 60 s
	// (kubernetes/kubernetes#130377, #136288: when apiservers start together on a new etcd,
	// one can see the kubernetes Service before the IPAddress another one created for it, and
	// its create of that IPAddress fails with "already exists"; the repair controller does not
	// retry). Kubelet starts it again, and so does the sandbox, on its own port: the Service and
	// its IPAddress are both in etcd by then.
	startUpRace
)

// restartMark begins the line restartAPIServer writes into the log before the next start.
const restartMark = "--- etcdmedic sandbox: "

// whyExited reads the last lines of an apiserver's log that exited before it was ready: only
// those of its last start, not the lines of the start before it.
func whyExited(tail string) exitCause {
	if i := strings.LastIndex(tail, restartMark); i >= 0 {
		tail = tail[i:]
	}
	switch {
	case strings.Contains(tail, "address already in use"):
		return portTaken
	case strings.Contains(tail, `PostStartHook "start-service-ip-repair-controllers" failed`):
		return startUpRace
	}
	return exitedForGood
}

// waitAPIServer waits until s is ready. When it has exited for a cause startAgain mends (at
// most apiServerStartTries times each), it goes on waiting; else it fails with the log's last
// lines.
func (sb *Sandbox) waitAPIServer(ctx context.Context, s *kubeapi.Server, timeout time.Duration, startAgain func(exitCause) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	started := time.Now()
	tries := map[exitCause]int{}
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		err := kubeapi.Ready(rctx, s.URL, &sb.Kubernetes.Credentials)
		rcancel()
		if err == nil {
			return nil
		}
		if !alive(s.PID) { // its process, not its command line: see waitStarted
			url, log := s.URL, s.LogFile
			tail := lastLines(log, 20)
			exited := fmt.Errorf("the apiserver beside %s (%s) exited before it was ready; the last lines of %s:\n%s", s.Name, url, log, tail)
			why := whyExited(tail)
			if why == exitedForGood || tries[why] == apiServerStartTries {
				return exited
			}
			if err := startAgain(why); err != nil {
				return fmt.Errorf("%w\nstarting it again: %v", exited, err)
			}
			tries[why]++
			continue
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("apiserver %s not ready after %s: %v (log: %s)", s.URL, time.Since(started).Round(time.Second), err, s.LogFile)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// restartAPIServer starts s, which exited, again on its port, as kubelet would. Its log goes
// on, after a line that says so.
func (sb *Sandbox) restartAPIServer(s *kubeapi.Server) error {
	log, err := openPrivate(s.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return fmt.Errorf("open apiserver log: %w", err)
	}
	_, err = fmt.Fprintf(log, "%spid %d exited before it was ready; started again at %s\n", restartMark, s.PID, time.Now().UTC().Format(time.RFC3339Nano))
	if cerr := log.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return sb.startAPIServer(s)
}

// moveAPIServer starts s, which exited, again on a port chosen anew. Its log starts over (the
// old one is kept beside it), so that what it says is its own. If it cannot be started, s is
// left as it was.
func (sb *Sandbox) moveAPIServer(s *kubeapi.Server) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	if err := os.Rename(s.LogFile, fmt.Sprintf("%s.port-%d-taken", s.LogFile, s.Port)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	was := *s
	s.Port = ports[0]
	s.URL = fmt.Sprintf("https://127.0.0.1:%d", s.Port)
	if err := sb.startAPIServer(s); err != nil {
		*s = was
		return err
	}
	return nil
}

// APIServer returns the apiserver beside member name.
func (sb *Sandbox) APIServer(name string) (*kubeapi.Server, error) {
	if sb.Kubernetes != nil {
		for i := range sb.Kubernetes.APIServers {
			if sb.Kubernetes.APIServers[i].Name == name {
				return &sb.Kubernetes.APIServers[i], nil
			}
		}
	}
	return nil, fmt.Errorf("the sandbox runs no apiserver beside %q", name)
}

// StopAPIServer stops the apiserver beside member name (SIGTERM, then SIGKILL after grace).
func (sb *Sandbox) StopAPIServer(name string, grace time.Duration) error {
	s, err := sb.APIServer(name)
	if err != nil {
		return err
	}
	err = sb.stopAPIServer(s, grace)
	if serr := sb.save(); err == nil {
		err = serr
	}
	return err
}

// StartAPIServer starts the apiserver beside member name again.
func (sb *Sandbox) StartAPIServer(name string) error {
	s, err := sb.APIServer(name)
	if err != nil {
		return err
	}
	if apiServerRunning(s) {
		return fmt.Errorf("the apiserver beside %s is already running (pid %d)", name, s.PID)
	}
	if err := sb.startAPIServer(s); err != nil {
		return err
	}
	return sb.save()
}

func (sb *Sandbox) startAPIServer(s *kubeapi.Server) error {
	log, err := openPrivate(s.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return fmt.Errorf("open apiserver log: %w", err)
	}
	defer log.Close()
	bin := sb.Kubernetes.Binary
	p, err := os.StartProcess(bin, append([]string{bin}, s.Args(&sb.Kubernetes.Credentials)...), &os.ProcAttr{
		Dir:   sb.Dir,
		Env:   etcdruntime.Environ(nil),
		Files: []*os.File{nil, log, log},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		return fmt.Errorf("start the apiserver beside %s: %w", s.Name, err)
	}
	s.PID = p.Pid
	return p.Release()
}

func (sb *Sandbox) stopAPIServer(s *kubeapi.Server, grace time.Duration) error {
	pid := s.PID
	foreign, err := stopOwn(pid, func(pid int) bool { return isAPIServer(pid, s) }, grace)
	s.PID = 0
	if foreign {
		return fmt.Errorf("pid %d, recorded for the apiserver beside %s, runs %q: not signalled", pid, s.Name, strings.Join(cmdline(pid), " "))
	}
	return err
}

func apiServerRunning(s *kubeapi.Server) bool {
	return s.PID > 0 && alive(s.PID) && isAPIServer(s.PID, s)
}

// isAPIServer: pid serves with s's cert dir, which only s's apiserver is given.
func isAPIServer(pid int, s *kubeapi.Server) bool {
	return local.SamePath(kubeapi.FlagValue(cmdline(pid), "--cert-dir"), s.CertDir)
}

// APIServerStatus is one apiserver's process and readiness.
type APIServerStatus struct {
	kubeapi.Server
	Running bool   `json:"running"`
	Ready   bool   `json:"ready"`
	Error   string `json:"error,omitempty"`
}

// APIServerStatuses asks every apiserver whether it is ready, each with its own short timeout.
func (sb *Sandbox) APIServerStatuses(ctx context.Context) []APIServerStatus {
	if sb.Kubernetes == nil {
		return nil
	}
	var out []APIServerStatus
	for _, s := range sb.Kubernetes.APIServers {
		st := APIServerStatus{Server: s, Running: apiServerRunning(&s)}
		if st.Running {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := kubeapi.Ready(rctx, s.URL, &sb.Kubernetes.Credentials)
			cancel()
			st.Ready = err == nil
			if err != nil {
				st.Error = err.Error()
			}
		}
		out = append(out, st)
	}
	return out
}
