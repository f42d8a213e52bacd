package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// startTimeout bounds Start when the caller's context has no earlier deadline. A cold
// kube-apiserver on a busy two-core machine needs well under a minute.
const startTimeout = 2 * time.Minute

// errNotStarted refuses components on an Env that Start did not return.
var errNotStarted = errors.New("testenv: env was not started with Start")

// Options selects the components started beside etcd and kube-apiserver.
type Options struct {
	// ControllerManager starts a kube-controller-manager with ControllerManagerArgs.
	ControllerManager bool
	// ControllerManagerArgs are appended to the defaults of StartControllerManager; a
	// flag given here overrides the default of the same name.
	ControllerManagerArgs []string
	// Scheduler starts a kube-scheduler.
	Scheduler bool
	// Kwok starts kwok managing every Node, so Nodes turn Ready and keep heartbeating.
	Kwok bool
	// Dir, when set, is the env directory instead of a new temporary one, for a control
	// plane whose files must be found at a known place (nephele up). It is created if
	// missing and must be empty: a control plane never starts on another's etcd data or
	// credentials. Stop removes it like a temporary one; StopKeepingLogs keeps it.
	Dir string
	// BinDir, when set, is where the binaries are looked up instead of BinDir().
	BinDir string
}

// Env is a running control plane. Its exported fields are set by Start and must not be
// changed.
type Env struct {
	// Dir holds the credentials, the etcd data and one log file per process.
	Dir string
	// Kubeconfig is the path of a kubeconfig file for the admin identity.
	Kubeconfig string
	// Token is the admin bearer token; its user is in group system:masters.
	Token string
	// APIServerURL is the https URL of kube-apiserver.
	APIServerURL string
	// Config is a client configuration for the admin identity.
	Config *rest.Config
	// Client is a clientset for the admin identity.
	Client kubernetes.Interface

	// ControllerManager, Scheduler and Kwok are the processes Start ran for Options, or
	// nil when not requested.
	ControllerManager *Process
	Scheduler         *Process
	Kwok              *Process

	binDir string
	creds  *credentials

	mu      sync.Mutex
	procs   []*Process     // in start order; stopped in reverse, so etcd goes last
	counts  map[string]int // per component, to give each start its own log file
	stopped bool

	stopOnce sync.Once
	stopErr  error
}

// Start starts etcd and kube-apiserver, then the components opts asks for, and returns
// once the apiserver is ready and its RBAC bootstrap is done. ctx bounds startup only: the
// processes run until Stop. On error nothing is left running; once processes were started
// the error is a *StartError naming the directory kept with their logs.
func Start(ctx context.Context, opts Options) (*Env, error) {
	binDir := opts.BinDir
	if binDir == "" {
		var err error
		if binDir, err = BinDir(); err != nil {
			return nil, err
		}
	}
	if err := checkBinaries(binDir, opts); err != nil {
		return nil, err
	}
	ctx, cancel := withStartTimeout(ctx)
	defer cancel()
	dir, err := envDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, binDir: binDir, counts: map[string]int{}}
	if err := e.start(ctx, opts); err != nil {
		if stopErr := e.StopKeepingLogs(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, &StartError{Dir: dir, Err: err}
	}
	return e, nil
}

// envDir creates the env directory: dir if given (it must be empty), else a temporary one.
func envDir(dir string) (string, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "nephele-testenv-")
		if err != nil {
			return "", fmt.Errorf("create env directory: %w", err)
		}
		return d, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("env directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("create env directory: %w", err)
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return "", fmt.Errorf("env directory %s: %w", abs, err)
	}
	if len(entries) > 0 {
		return "", fmt.Errorf("env directory %s is not empty (holds %s)", abs, entries[0].Name())
	}
	return abs, nil
}

// StartError reports a Start that failed after processes were started. Everything was
// stopped again; Dir was kept for its logs.
type StartError struct {
	// Dir is the env directory holding each process's log.
	Dir string
	// Err says what failed, with the end of the failing process's log.
	Err error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("start control plane (logs in %s): %v", e.Dir, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

func (e *Env) start(ctx context.Context, opts Options) error {
	creds, err := writeCredentials(e.Dir)
	if err != nil {
		return err
	}
	e.creds = creds
	e.Token = creds.token
	e.Kubeconfig = creds.kubeconfig

	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	etcd, err := e.run(etcdBinary, []string{
		"--name", "testenv",
		"--data-dir", filepath.Join(e.Dir, "etcd"),
		"--listen-client-urls", etcdURL,
		"--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL,
		"--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "testenv=" + peerURL,
		// Durability is worthless for a throwaway store and fsync is slow on busy disks.
		"--unsafe-no-fsync",
	}, nil)
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, etcd, etcdURL+"/health"); err != nil {
		return err
	}

	e.APIServerURL = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	if err := creds.writeKubeconfig(e.APIServerURL); err != nil {
		return err
	}
	apiserver, err := e.run(apiserverBinary, []string{
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(ports[2]),
		"--tls-cert-file", creds.certFile,
		"--tls-private-key-file", creds.keyFile,
		"--cert-dir", filepath.Join(e.Dir, "apiserver-certs"),
		"--token-auth-file", creds.tokenFile,
		"--authorization-mode", "Node,RBAC",
		"--service-account-issuer", serviceIssuer,
		"--service-account-key-file", creds.saPub,
		"--service-account-signing-key-file", creds.saKey,
		"--service-cluster-ip-range", serviceCIDR,
		"--allow-privileged=true",
		// The kubernetes Service cannot have a loopback endpoint; without a reconciler the
		// apiserver does not log a validation error for it every ten seconds.
		"--endpoint-reconciler-type=none",
	}, nil)
	if err != nil {
		return err
	}
	e.Config = &rest.Config{
		Host:            e.APIServerURL,
		BearerToken:     creds.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: creds.caPEM},
		// Tests create objects in bursts; client-side throttling only slows them down.
		QPS:   100,
		Burst: 200,
	}
	client, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	e.Client = client
	if err := e.waitReady(ctx, apiserver); err != nil {
		return err
	}

	if opts.ControllerManager {
		if e.ControllerManager, err = e.StartControllerManager(ctx, opts.ControllerManagerArgs...); err != nil {
			return err
		}
	}
	if opts.Scheduler {
		if e.Scheduler, err = e.StartScheduler(ctx); err != nil {
			return err
		}
	}
	if opts.Kwok {
		if e.Kwok, err = e.StartKwok(ctx); err != nil {
			return err
		}
	}
	return nil
}

// waitReady waits for /readyz, then for what tests touch first: the default namespace
// and the RBAC bootstrap policy, here the system:kube-controller-manager ClusterRole.
func (e *Env) waitReady(ctx context.Context, apiserver *Process) error {
	err := poll(ctx, apiserver, "kube-apiserver /readyz", func(ctx context.Context) error {
		_, err := e.Client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
	if err != nil {
		return err
	}
	err = poll(ctx, apiserver, "namespace default", func(ctx context.Context) error {
		_, err := e.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	if err != nil {
		return err
	}
	return poll(ctx, apiserver, "ClusterRole system:kube-controller-manager", func(ctx context.Context) error {
		_, err := e.Client.RbacV1().ClusterRoles().Get(ctx, "system:kube-controller-manager", metav1.GetOptions{})
		return err
	})
}

// StartControllerManager starts a kube-controller-manager with an external cloud provider
// (so it runs no cloud controllers), the service account signing key, no serving port and,
// unless args say otherwise, no leader election. args are appended after the defaults and
// override them, e.g. "--leader-elect=true", "--controllers=*,-nodeipam" or
// "--enable-leader-migration", "--leader-migration-config=FILE". With no serving port
// there is nothing to probe: it returns once the process has run for a moment without
// exiting, so wait on its effects, such as its Lease. Each call starts a new process with
// its own log file.
func (e *Env) StartControllerManager(ctx context.Context, args ...string) (*Process, error) {
	return e.StartControllerManagerBinary(ctx, controllerManagerBinary, args...)
}

// StartControllerManagerBinary is StartControllerManager for another kube-controller-manager
// build in the bin directory, such as ControllerManagerV135.
func (e *Env) StartControllerManagerBinary(ctx context.Context, binary string, args ...string) (*Process, error) {
	if e.creds == nil {
		return nil, errNotStarted
	}
	defaults := []string{
		"--kubeconfig", e.Kubeconfig,
		"--authentication-kubeconfig", e.Kubeconfig,
		"--authorization-kubeconfig", e.Kubeconfig,
		"--cloud-provider=external",
		"--service-account-private-key-file", e.creds.saKey,
		"--root-ca-file", e.creds.caFile,
		"--secure-port=0",
		"--leader-elect=false",
	}
	return e.startComponent(ctx, binary, append(defaults, args...))
}

// StartScheduler starts a kube-scheduler without leader election or serving port; args
// are appended after the defaults and override them. Like StartControllerManager, it
// returns once the process has run for a moment without exiting.
func (e *Env) StartScheduler(ctx context.Context, args ...string) (*Process, error) {
	if e.creds == nil {
		return nil, errNotStarted
	}
	defaults := []string{
		"--kubeconfig", e.Kubeconfig,
		"--authentication-kubeconfig", e.Kubeconfig,
		"--authorization-kubeconfig", e.Kubeconfig,
		"--secure-port=0",
		"--leader-elect=false",
	}
	return e.startComponent(ctx, schedulerBinary, append(defaults, args...))
}

// StartKwok starts kwok managing all Nodes with every stage file in bin/kwok-stages, so
// Nodes turn Ready and heartbeat and Pods bound to them run. args are appended after the
// defaults. It returns once kwok's health endpoint answers.
func (e *Env) StartKwok(ctx context.Context, args ...string) (*Process, error) {
	if e.creds == nil {
		return nil, errNotStarted
	}
	if _, err := binary(e.binDir, kwokBinary); err != nil {
		return nil, err
	}
	stages, err := kwokStages(e.binDir)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	defaults := []string{
		"--kubeconfig", e.Kubeconfig,
		"--manage-all-nodes=true",
		"--server-address", addr,
	}
	for _, s := range stages {
		defaults = append(defaults, "--config", s)
	}
	ctx, cancel := withStartTimeout(ctx)
	defer cancel()
	// kwok reads ~/.kwok/kwok.yaml when present; a HOME of its own keeps the user's out.
	home := filepath.Join(e.Dir, "kwok-home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, fmt.Errorf("start kwok: %w", err)
	}
	p, err := e.run(kwokBinary, append(defaults, args...), []string{"HOME=" + home})
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, p, "http://"+addr+"/healthz"); err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	return p, nil
}

// startComponent runs a component that has nothing to probe, and catches the common case
// of it failing at once on a bad flag.
func (e *Env) startComponent(ctx context.Context, name string, args []string) (*Process, error) {
	p, err := e.run(name, args, nil)
	if err != nil {
		return nil, err
	}
	settle := time.NewTimer(500 * time.Millisecond)
	defer settle.Stop()
	select {
	case <-p.Done():
		return nil, p.exitedError()
	case <-ctx.Done():
		return nil, errors.Join(fmt.Errorf("start %s: %w", name, context.Cause(ctx)), p.Stop())
	case <-settle.C:
		return p, nil
	}
}

// StartProcess starts another binary from the bin directory as part of the env, such as
// a cloud-controller-manager or a cloud service the control plane works with. Like the
// control plane's own processes it runs in its own process group, logs to a file in Dir
// named after it, and is stopped by Stop before every process started earlier, so it can
// still reach the apiserver while it shuts down. It returns as soon as the process has
// started: readiness is the caller's to wait for, for example on p.Done() and a probe.
func (e *Env) StartProcess(name string, args ...string) (*Process, error) {
	if e.creds == nil {
		return nil, errNotStarted
	}
	return e.run(name, args, nil)
}

// withStartTimeout applies the default startup bound to a context without a deadline.
func withStartTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, startTimeout)
}

// StartCommand starts cmd, a program from anywhere (its path, arguments and environment
// set by the caller), as a process of the env named name: like StartProcess, it runs in
// its own process group, logs to name's file in Dir and is stopped by Stop before every
// process started earlier. The caller must not set cmd's output or SysProcAttr.
func (e *Env) StartCommand(name string, cmd *exec.Cmd) (*Process, error) {
	if e.creds == nil {
		return nil, errNotStarted
	}
	return e.startCommand(name, cmd)
}

// run starts a binary from the bin directory, logging to its own file in Dir, and
// registers it so Stop ends it. extraEnv is added to the test's environment.
func (e *Env) run(name string, args, extraEnv []string) (*Process, error) {
	path, err := binary(e.binDir, name)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	return e.startCommand(name, cmd)
}

// startCommand starts cmd as process name, logging to its own file in Dir, and registers it so
// Stop ends it.
func (e *Env) startCommand(name string, cmd *exec.Cmd) (*Process, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil, fmt.Errorf("start %s: env is stopped", name)
	}
	e.counts[name]++
	logName := name + ".log"
	if n := e.counts[name]; n > 1 {
		logName = fmt.Sprintf("%s-%d.log", name, n)
	}
	p, err := startCommand(name, cmd, filepath.Join(e.Dir, logName))
	if err != nil {
		return nil, err
	}
	e.procs = append(e.procs, p)
	return p, nil
}

// ServiceAccountKey returns the path of the RSA private key service account tokens are
// signed with, for components that issue tokens themselves.
func (e *Env) ServiceAccountKey() string {
	if e.creds == nil {
		return ""
	}
	return e.creds.saKey
}

// CAFile returns the path of the CA certificate that signed the apiserver's certificate.
func (e *Env) CAFile() string {
	if e.creds == nil {
		return ""
	}
	return e.creds.caFile
}

// Stop stops every process the env started, latest first and etcd last, then removes Dir.
// It is safe to call more than once, also after a failed Start.
func (e *Env) Stop() error {
	err := e.StopKeepingLogs()
	if rmErr := os.RemoveAll(e.Dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("remove env directory: %w", rmErr))
	}
	return err
}

// StopKeepingLogs stops every process like Stop but leaves Dir and its logs in place, for
// when a test failed.
func (e *Env) StopKeepingLogs() error {
	e.stopOnce.Do(func() {
		e.mu.Lock()
		e.stopped = true
		procs := e.procs
		e.mu.Unlock()
		var errs []error
		for i := len(procs) - 1; i >= 0; i-- {
			errs = append(errs, procs[i].Stop())
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// Logs returns the paths of the log files of every process started so far.
func (e *Env) Logs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	paths := make([]string, 0, len(e.procs))
	for _, p := range e.procs {
		paths = append(paths, p.logPath)
	}
	return paths
}

// New starts an env for one test (see Start) and stops it when the test ends. If the test
// failed, Dir is kept, its path logged together with the end of every log file; otherwise
// Dir is removed.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	e, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			if err := e.Stop(); err != nil {
				t.Errorf("testenv: stop: %v", err)
			}
			return
		}
		err := e.StopKeepingLogs()
		for _, path := range e.Logs() {
			t.Logf("testenv: end of %s:\n%s", path, indent(logTail(path, 30)))
		}
		t.Logf("testenv: control plane directory kept: %s", e.Dir)
		if err != nil {
			t.Errorf("testenv: stop: %v", err)
		}
	})
	return e
}

// freePorts returns n distinct ports that were free a moment ago. All listeners stay
// open until every port is chosen, so the n ports differ.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitHTTP waits until url answers 200 OK.
func waitHTTP(ctx context.Context, p *Process, url string) error {
	// No keep-alive: nothing of the probe should linger once the process is up.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	return poll(ctx, p, url, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	})
}

// poll calls check until it succeeds, failing early with the process's log when it exits
// and with the last check error when ctx ends.
func poll(ctx context.Context, p *Process, what string, check func(context.Context) error) error {
	const interval = 200 * time.Millisecond
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("waiting for %s: %w", what, p.exitedError())
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, context.Cause(ctx), err)
		case <-tick.C:
		}
	}
}
