package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// startTimeout bounds Start when the caller's context has no earlier deadline. A cold
// kube-apiserver on a busy two-core machine needs well under a minute.
const startTimeout = 2 * time.Minute

// errNotStarted refuses components on an Env that Start did not return.
var errNotStarted = errors.New("controlplane: Env was not started with Start")

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
	// Address, when set, is the address kube-apiserver listens on and advertises instead
	// of 127.0.0.1: an address of this machine that other network namespaces reach,
	// such as a local cloud bridge's, for real nodes whose kubelets and pods talk to the
	// apiserver. It must be assigned to an interface before Start. The serving
	// certificate names it, APIServerURL and the kubeconfig use it, and the kubernetes
	// Service's endpoint is it (a loopback address cannot be an endpoint).
	Address netip.Addr
	// APIServerArgs are added to kube-apiserver's flags, e.g. --audit-log-path and
	// --audit-policy-file.
	APIServerArgs []string
	// ServiceCIDR is the Service IP range (--service-cluster-ip-range); default
	// DefaultServiceCIDR. Its first address is the kubernetes Service's, which the
	// serving certificate names.
	ServiceCIDR netip.Prefix
}

// DefaultServiceCIDR is the Service IP range of a control plane started without
// Options.ServiceCIDR.
var DefaultServiceCIDR = netip.MustParsePrefix("10.96.0.0/16")

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
	// EtcdURL is where etcd serves its clients, on loopback with mutual TLS: it accepts
	// only a client certificate of its own CA, which kube-apiserver alone holds.
	EtcdURL string
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
	if !opts.ServiceCIDR.IsValid() {
		opts.ServiceCIDR = DefaultServiceCIDR
	}
	if !opts.ServiceCIDR.Addr().Is4() || opts.ServiceCIDR.Bits() > 30 {
		return nil, fmt.Errorf("controlplane: service CIDR %s: want an IPv4 range of at least 4 addresses", opts.ServiceCIDR)
	}
	if opts.Address.IsValid() && !opts.Address.Is4() {
		return nil, fmt.Errorf("controlplane: address %s: want an IPv4 address", opts.Address)
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
		d, err := os.MkdirTemp("", "nephele-controlplane-")
		if err != nil {
			return "", fmt.Errorf("create env directory: %w", err)
		}
		return d, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("env directory %s: %w", dir, err)
	}
	// Owner only: it holds the admin token, the CAs' keys and etcd's data.
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("create env directory: %w", err)
	}
	if err := os.Chmod(abs, 0o700); err != nil {
		return "", fmt.Errorf("env directory %s: %w", abs, err)
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
	svc := opts.ServiceCIDR.Masked()
	creds, err := writeCredentials(e.Dir, svc.Addr().Next(), opts.Address)
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
	etcdURL := "https://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "https://127.0.0.1:" + strconv.Itoa(ports[1])
	// The member name must be the same in --name and --initial-cluster.
	const etcdMember = "nephele"
	et := creds.etcd
	e.EtcdURL = etcdURL
	etcd, err := e.run(etcdBinary, []string{
		"--name", etcdMember,
		"--data-dir", filepath.Join(e.Dir, "etcd"),
		"--listen-client-urls", etcdURL,
		"--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL,
		"--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", etcdMember + "=" + peerURL,
		// Durability is worthless for a throwaway store and fsync is slow on busy disks.
		"--unsafe-no-fsync",
		// Clients and peers need a certificate of etcd's own CA (writeEtcdCerts): only
		// kube-apiserver has one.
		"--cert-file", et.serverCert, "--key-file", et.serverKey,
		"--client-cert-auth", "--trusted-ca-file", et.caFile,
		"--peer-cert-file", et.serverCert, "--peer-key-file", et.serverKey,
		"--peer-client-cert-auth", "--peer-trusted-ca-file", et.caFile,
	}, nil)
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, etcd, etcdURL+"/health", et.tls); err != nil {
		return err
	}

	addr, reconciler := "127.0.0.1", "lease"
	if opts.Address.IsValid() {
		addr = opts.Address.String()
	}
	if !opts.Address.IsValid() || opts.Address.IsLoopback() {
		// The kubernetes Service cannot have a loopback endpoint; without a reconciler
		// the apiserver does not log a validation error for it every ten seconds.
		reconciler = "none"
	}
	e.APIServerURL = "https://" + net.JoinHostPort(addr, strconv.Itoa(ports[2]))
	if err := creds.writeKubeconfig(e.APIServerURL); err != nil {
		return err
	}
	apiserver, err := e.run(apiserverBinary, append([]string{
		"--etcd-servers", etcdURL,
		"--etcd-cafile", et.caFile,
		"--etcd-certfile", et.clientCert,
		"--etcd-keyfile", et.clientKey,
		"--bind-address", addr,
		"--advertise-address", addr,
		"--secure-port", strconv.Itoa(ports[2]),
		"--tls-cert-file", creds.certFile,
		"--tls-private-key-file", creds.keyFile,
		"--cert-dir", filepath.Join(e.Dir, "apiserver-certs"),
		"--token-auth-file", creds.tokenFile,
		// Client certificates signed by the env's CA authenticate, as kubelets' do
		// (IssueClientCertificate).
		"--client-ca-file", creds.caFile,
		// A real cluster's authorization: nodes are confined to their own Node and pods.
		"--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", "NodeRestriction",
		// How the apiserver reaches kubelets for logs, exec and port-forward: by the
		// node's InternalIP (node names resolve nowhere), as itself in system:masters.
		"--kubelet-preferred-address-types", "InternalIP,Hostname",
		"--kubelet-client-certificate", creds.kubeletClientCert,
		"--kubelet-client-key", creds.kubeletClientKey,
		"--service-account-issuer", serviceIssuer,
		"--service-account-key-file", creds.saPub,
		"--service-account-signing-key-file", creds.saKey,
		"--service-cluster-ip-range", svc.String(),
		"--allow-privileged=true",
		"--endpoint-reconciler-type=" + reconciler,
		// kube-apiserver runs on the machine, outside every node, where no kube-proxy
		// serves ClusterIPs: it calls admission and conversion webhooks and aggregated
		// APIs at their Services' endpoints, the pod addresses the local cloud's routes
		// reach from the machine (kind needs no such flag: its apiserver runs in a node).
		"--enable-aggregator-routing=true",
		// The aggregation layer's authentication toward aggregated API servers.
		"--requestheader-client-ca-file", creds.frontProxy.caFile,
		"--requestheader-allowed-names", frontProxyClientName,
		"--requestheader-username-headers", "X-Remote-User",
		"--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--proxy-client-cert-file", creds.frontProxy.clientCert,
		"--proxy-client-key-file", creds.frontProxy.clientKey,
	}, opts.APIServerArgs...), nil)
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
	err := apiserver.WaitFor(ctx, "kube-apiserver /readyz", func(ctx context.Context) error {
		_, err := e.Client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
	if err != nil {
		return err
	}
	err = apiserver.WaitFor(ctx, "namespace default", func(ctx context.Context) error {
		_, err := e.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	if err != nil {
		return err
	}
	return apiserver.WaitFor(ctx, "ClusterRole system:kube-controller-manager", func(ctx context.Context) error {
		_, err := e.Client.RbacV1().ClusterRoles().Get(ctx, "system:kube-controller-manager", metav1.GetOptions{})
		return err
	})
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

// IssueClientCertificate writes a client certificate for user in groups (its CN and O),
// signed by the env's CA, which the apiserver authenticates, and its key, to name.crt and
// name.key in Dir/pki; it returns their paths. A kubelet's identity is user
// "system:node:<node>" in group "system:nodes"; kube-proxy's is "system:kube-proxy".
func (e *Env) IssueClientCertificate(name, user string, groups ...string) (certFile, keyFile string, err error) {
	if e.creds == nil {
		return "", "", errNotStarted
	}
	return e.creds.issueClientCert(name, user, groups...)
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

// Processes returns every process started so far, in start order, running or not: etcd
// and kube-apiserver first, then the components and the processes of StartProcess and
// StartCommand. A test that failed prints the end of each one's log.
func (e *Env) Processes() []*Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*Process(nil), e.procs...)
}
