package controlplane_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
)

// pollTimeout bounds waits for things that take seconds; generous, so that a slow shared
// machine does not flake.
const pollTimeout = 90 * time.Second

// Short leases so a stopped leader's Lease expires within seconds, not the default 15.
var shortLease = []string{
	"--leader-elect=true",
	"--leader-elect-lease-duration=4s",
	"--leader-elect-renew-deadline=3s",
	"--leader-elect-retry-period=500ms",
}

func newNode(name string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{Taints: taints},
	}
}

// nodeReadyIn is a condition for poll: node name is Ready.
func nodeReadyIn(c kubernetes.Interface, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !nodeReady(n) {
			return fmt.Errorf("conditions %v", n.Status.Conditions)
		}
		return nil
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func leaseHolder(ctx context.Context, c kubernetes.Interface, name string) (string, error) {
	l, err := c.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return ptr.Deref(l.Spec.HolderIdentity, ""), nil
}

// assertProcessGone checks the process was reaped and its group is empty.
func assertProcessGone(t *testing.T, p *controlplane.Process) {
	t.Helper()
	select {
	case <-p.Done():
	default:
		t.Fatalf("%s (pid %d) has not exited", p.Name(), p.Pid())
	}
	if err := syscall.Kill(-p.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group of %s (pid %d) still exists: %v", p.Name(), p.Pid(), err)
	}
}

// TestControlPlane starts everything, as integration tests of the cloud controllers do,
// and checks each component does its part.
func TestControlPlane(t *testing.T) {
	var dir string
	t.Cleanup(func() {
		// Runs after New's cleanup: a passing test leaves nothing behind.
		if _, err := os.Stat(dir); !t.Failed() && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("env directory %s still exists after a passing test (stat: %v)", dir, err)
		}
	})
	env := testenv.New(t, controlplane.Options{
		ControllerManager:     true,
		ControllerManagerArgs: shortLease,
		Scheduler:             true,
		Kwok:                  true,
	})
	c := env.Client
	dir = env.Dir

	t.Run("kubeconfig file works", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Host != env.APIServerURL {
			t.Errorf("kubeconfig server = %q, want %q", cfg.Host, env.APIServerURL)
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range []string{"default", "kube-system"} {
			if _, err := client.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{}); err != nil {
				t.Errorf("get namespace %s: %v", ns, err)
			}
		}
	})

	t.Run("aggregated API servers trust the front proxy's certificate only", func(t *testing.T) {
		frontCA, err := os.ReadFile(filepath.Join(env.Dir, "front-proxy-pki", "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		clusterCA, err := os.ReadFile(filepath.Join(env.Dir, "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		if string(frontCA) == string(clusterCA) {
			t.Fatal("the front proxy's CA is the cluster's: any client certificate could assert a user to aggregated servers")
		}
		// What aggregated servers (metrics-server, sample-apiserver) read to authenticate
		// the aggregator; the apiserver writes it after it starts.
		poll.WithinContext(t, pollTimeout, "ConfigMap kube-system/extension-apiserver-authentication with the request-header CA", func(ctx context.Context) error {
			cm, err := c.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := cm.Data["requestheader-client-ca-file"]; got != string(frontCA) {
				return fmt.Errorf("requestheader-client-ca-file is %.40q..., want the front proxy's CA", got)
			}
			if got, want := cm.Data["requestheader-allowed-names"], `["front-proxy-client"]`; got != want {
				return fmt.Errorf("requestheader-allowed-names = %s, want %s", got, want)
			}
			return nil
		})
		cert, err := os.ReadFile(filepath.Join(env.Dir, "front-proxy-pki", "front-proxy-client.crt"))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(cert)
		if block == nil {
			t.Fatal("front-proxy-client.crt holds no PEM block")
		}
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(frontCA)
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("the aggregator's client certificate does not verify against the front proxy's CA: %v", err)
		}
		if leaf.Subject.CommonName != "front-proxy-client" {
			t.Errorf("the aggregator's client certificate is for %q, want front-proxy-client", leaf.Subject.CommonName)
		}
	})

	t.Run("etcd takes only kube-apiserver's client certificate", func(t *testing.T) {
		ca, err := os.ReadFile(filepath.Join(env.Dir, "etcd-pki", "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca)
		// A certificate of the cluster's CA, as every kubelet holds one.
		kubeletCert, kubeletKey, err := env.IssueClientCertificate("etcd-test-kubelet", "system:node:x", "system:nodes")
		if err != nil {
			t.Fatal(err)
		}
		pair := func(cert, key string) []tls.Certificate {
			p, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				t.Fatal(err)
			}
			return []tls.Certificate{p}
		}
		get := func(url string, certs []tls.Certificate) error {
			hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}, DisableKeepAlives: true}}
			resp, err := hc.Get(url)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s", resp.Status)
			}
			return nil
		}
		url := env.EtcdURL + "/v3/kv/range"
		if !strings.HasPrefix(env.EtcdURL, "https://127.0.0.1:") {
			t.Fatalf("etcd serves at %s, want https on loopback", env.EtcdURL)
		}
		if err := get(strings.Replace(env.EtcdURL, "https://", "http://", 1)+"/health", nil); err == nil {
			t.Error("etcd answered plain HTTP")
		}
		if err := get(url, nil); err == nil {
			t.Error("etcd answered a client without a certificate")
		}
		if err := get(url, pair(kubeletCert, kubeletKey)); err == nil {
			t.Error("etcd answered a client certificate of the cluster's CA (a kubelet's)")
		}
		if err := get(env.EtcdURL+"/health", pair(filepath.Join(env.Dir, "etcd-pki", "apiserver-etcd-client.crt"), filepath.Join(env.Dir, "etcd-pki", "apiserver-etcd-client.key"))); err != nil {
			t.Errorf("etcd refused kube-apiserver's client certificate: %v", err)
		}
		fi, err := os.Stat(env.Dir)
		if err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("env directory mode %v (%v), want owner only", fi.Mode(), err)
		}
	})

	t.Run("authentication and RBAC are on", func(t *testing.T) {
		tests := []struct {
			name  string
			token string
			want  func(error) bool
		}{
			// Anonymous requests are authenticated as system:anonymous, which RBAC refuses.
			{name: "anonymous", want: apierrors.IsForbidden},
			{name: "wrong token", token: "not-" + env.Token, want: apierrors.IsUnauthorized},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				cfg := rest.AnonymousClientConfig(env.Config)
				cfg.BearerToken = tt.token
				client, err := kubernetes.NewForConfig(cfg)
				if err != nil {
					t.Fatal(err)
				}
				_, err = client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
				if !tt.want(err) {
					t.Errorf("list nodes as %s: error %v, want it refused", tt.name, err)
				}
			})
		}
	})

	t.Run("client certificates from the env's CA authenticate, and NodeRestriction confines nodes", func(t *testing.T) {
		certFile, keyFile, err := env.IssueClientCertificate("node-cert", "system:node:cert-node", "system:nodes")
		if err != nil {
			t.Fatal(err)
		}
		cfg := rest.AnonymousClientConfig(env.Config)
		cfg.CertFile, cfg.KeyFile = certFile, keyFile
		node, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		review, err := node.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("self subject review with the client certificate: %v", err)
		}
		if u := review.Status.UserInfo; u.Username != "system:node:cert-node" || !slices.Contains(u.Groups, "system:nodes") {
			t.Errorf("the certificate authenticates as %s in %v, want system:node:cert-node in system:nodes", u.Username, u.Groups)
		}
		// The Node authorizer and NodeRestriction let a node create its own Node only.
		if _, err := node.CoreV1().Nodes().Create(t.Context(), newNode("cert-node"), metav1.CreateOptions{}); err != nil {
			t.Errorf("node creates its own Node: %v", err)
		}
		// Later subtests expect to schedule onto nodes of their own only.
		t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), "cert-node", metav1.DeleteOptions{}) })
		if _, err := node.CoreV1().Nodes().Create(t.Context(), newNode("someone-else"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("node creates another Node: error %v, want Forbidden", err)
		}
	})

	t.Run("StartCommand runs a command of the caller's as part of the env", func(t *testing.T) {
		cmd := exec.Command("/bin/sh", "-c", `echo "started with $GREETING"; exec sleep 600`)
		cmd.Env = append(os.Environ(), "GREETING=hello")
		p, err := env.StartCommand("greeter", cmd)
		if err != nil {
			t.Fatal(err)
		}
		poll.Within(t, 30*time.Second, "the command's output in its log", func() error {
			if tail := p.LogTail(5); !strings.Contains(tail, "started with hello") {
				return fmt.Errorf("%s ends:\n%s", p.LogPath(), tail)
			}
			return nil
		})
		if filepath.Dir(p.LogPath()) != env.Dir {
			t.Errorf("log %s is not in the env directory %s", p.LogPath(), env.Dir)
		}
		if err := p.Stop(); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		select {
		case <-p.Done():
		default:
			t.Error("the process still runs after Stop")
		}
	})

	t.Run("kwok makes an uninitialized node ready", func(t *testing.T) {
		taint := corev1.Taint{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}
		if _, err := c.CoreV1().Nodes().Create(t.Context(), newNode("uninitialized", taint), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.WithinContext(t, pollTimeout, "node uninitialized Ready", nodeReadyIn(c, "uninitialized"))
	})

	t.Run("scheduler binds a pod and kwok runs it", func(t *testing.T) {
		if _, err := c.CoreV1().Nodes().Create(t.Context(), newNode("worker"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The ServiceAccount admission plugin refuses pods until the controller
		// manager has created the namespace's default ServiceAccount.
		poll.WithinContext(t, pollTimeout, "ServiceAccount default/default", func(ctx context.Context) error {
			_, err := c.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			return err
		})
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"},
			Spec: corev1.PodSpec{
				AutomountServiceAccountToken: ptr.To(false),
				Containers:                   []corev1.Container{{Name: "app", Image: "app:1"}},
			},
		}
		if _, err := c.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.WithinContext(t, pollTimeout, "pod default/app running on worker", func(ctx context.Context) error {
			p, err := c.CoreV1().Pods("default").Get(ctx, "app", metav1.GetOptions{})
			if err != nil {
				return err
			}
			// The uninitialized node is tainted, so only worker fits.
			if p.Spec.NodeName != "worker" || p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("on node %q, %s", p.Spec.NodeName, p.Status.Phase)
			}
			return nil
		})
	})

	t.Run("controller manager leader hands over after stop", func(t *testing.T) {
		var first string
		poll.WithinContext(t, pollTimeout, "Lease kube-system/kube-controller-manager held", func(ctx context.Context) error {
			h, err := leaseHolder(ctx, c, "kube-controller-manager")
			if err == nil && h == "" {
				err = errors.New("no holder")
			}
			first = h
			return err
		})

		if err := env.ControllerManager.Stop(); err != nil {
			t.Fatalf("stop controller manager: %v", err)
		}
		assertProcessGone(t, env.ControllerManager)
		if err := env.ControllerManager.Stop(); err != nil {
			t.Errorf("second Stop: %v", err)
		}

		second, err := env.StartControllerManager(t.Context(), shortLease...)
		if err != nil {
			t.Fatal(err)
		}
		if second.LogPath() == env.ControllerManager.LogPath() {
			t.Errorf("second controller manager logs to the first one's file %s", second.LogPath())
		}
		poll.WithinContext(t, pollTimeout, "Lease kube-system/kube-controller-manager taken over", func(ctx context.Context) error {
			h, err := leaseHolder(ctx, c, "kube-controller-manager")
			if err == nil && (h == "" || h == first) {
				err = fmt.Errorf("held by %q", h)
			}
			return err
		})
		if err := second.Stop(); err != nil {
			t.Fatalf("stop second controller manager: %v", err)
		}
		assertProcessGone(t, second)
	})

	t.Run("kwok restarts", func(t *testing.T) {
		if err := env.Kwok.Stop(); err != nil {
			t.Fatalf("stop kwok: %v", err)
		}
		assertProcessGone(t, env.Kwok)
		kwok, err := env.StartKwok(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CoreV1().Nodes().Create(t.Context(), newNode("late"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.WithinContext(t, pollTimeout, "node late Ready", nodeReadyIn(c, "late"))
		if err := kwok.Stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestStartFailureCleansUp starts a real etcd and an apiserver that fails at once: Start
// must report the apiserver's own words, keep the logs and leave no etcd running.
func TestStartFailureCleansUp(t *testing.T) {
	realBin, err := controlplane.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(filepath.Join(realBin, "etcd"), filepath.Join(bin, "etcd")); err != nil {
		t.Fatal(err)
	}
	broken := "#!/bin/sh\necho 'apiserver says: no such flag' >&2\nexit 2\n"
	if err := os.WriteFile(filepath.Join(bin, "kube-apiserver"), []byte(broken), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(controlplane.BinDirEnv, bin)

	env, err := controlplane.Start(t.Context(), controlplane.Options{})
	if err == nil {
		_ = env.Stop()
		t.Fatal("Start() succeeded with a broken kube-apiserver")
	}
	for _, want := range []string{"kube-apiserver exited", "apiserver says: no such flag", "logs in "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start() error does not contain %q:\n%v", want, err)
		}
	}
	var startErr *controlplane.StartError
	if !errors.As(err, &startErr) {
		t.Fatalf("Start() error %v is not a *StartError", err)
	}
	dir := startErr.Dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if _, err := os.Stat(filepath.Join(dir, "etcd.log")); err != nil {
		t.Errorf("etcd log not kept: %v", err)
	}
	if pids := proctest.Mentioning(t, dir); len(pids) > 0 {
		t.Errorf("processes %v still run from %s after the failed Start", pids, dir)
	}
}

// TestZeroEnv checks an Env not made by Start refuses to start components instead of
// panicking, and stops as a no-op.
func TestZeroEnv(t *testing.T) {
	var env controlplane.Env
	starts := map[string]func(context.Context, ...string) (*controlplane.Process, error){
		"StartControllerManager": env.StartControllerManager,
		"StartScheduler":         env.StartScheduler,
		"StartKwok":              env.StartKwok,
		"StartProcess": func(context.Context, ...string) (*controlplane.Process, error) {
			return env.StartProcess("etcd", "--version")
		},
	}
	for name, start := range starts {
		if p, err := start(t.Context()); err == nil {
			_ = p.Stop()
			t.Errorf("%s() on a zero Env succeeded", name)
		}
	}
	if err := env.Stop(); err != nil {
		t.Errorf("Stop() on a zero Env: %v", err)
	}
}

// TestStartInDir starts an env in a given directory with binaries from a given bin
// directory, runs one more binary as part of it, and checks what stays behind.
func TestStartInDir(t *testing.T) {
	realBin, err := controlplane.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if err := os.Symlink(filepath.Join(realBin, name), filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	// A helper that says it started and then waits to be stopped.
	helper := "#!/bin/sh\necho \"helper started: $*\"\nexec sleep 600\n"
	if err := os.WriteFile(filepath.Join(bin, "helper"), []byte(helper), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "nested", "env")

	env, err := controlplane.Start(t.Context(), controlplane.Options{Dir: dir, BinDir: bin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	if env.Dir != dir {
		t.Errorf("Dir = %q, want %q", env.Dir, dir)
	}
	if filepath.Dir(env.Kubeconfig) != dir {
		t.Errorf("Kubeconfig %q is not in %s", env.Kubeconfig, dir)
	}

	p, err := env.StartProcess("helper", "--flag", "value")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "helper.log"); p.LogPath() != want {
		t.Errorf("LogPath() = %q, want %q", p.LogPath(), want)
	}
	poll.Within(t, pollTimeout, "helper log", func() error {
		if tail := p.LogTail(5); !strings.Contains(tail, "helper started: --flag value") {
			return fmt.Errorf("log tail:\n%s", tail)
		}
		return nil
	})
	if _, err := env.StartProcess("no-such-binary"); !errors.As(err, new(*controlplane.MissingBinaryError)) {
		t.Errorf("StartProcess(no-such-binary): error %v, want a *MissingBinaryError", err)
	}

	// A second env refuses the directory in use rather than mixing its files in.
	if other, err := controlplane.Start(t.Context(), controlplane.Options{Dir: dir, BinDir: bin}); err == nil {
		_ = other.Stop()
		t.Fatal("Start() in a non-empty directory succeeded")
	} else if !strings.Contains(err.Error(), "not empty") {
		t.Errorf("Start() in a non-empty directory: error %v, want it to say so", err)
	}

	var names []string
	for _, p := range env.Processes() {
		names = append(names, p.Name())
	}
	if got, want := strings.Join(names, " "), "etcd kube-apiserver helper"; got != want {
		t.Errorf("Processes() = %s, want %s", got, want)
	}

	if err := env.StopKeepingLogs(); err != nil {
		t.Fatal(err)
	}
	assertProcessGone(t, p)
	if _, err := env.StartProcess("helper"); err == nil || !strings.Contains(err.Error(), "env is stopped") {
		t.Errorf("StartProcess() on a stopped env: error %v, want it refused", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "helper.log")); err != nil {
		t.Errorf("helper log not kept: %v", err)
	}
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stop() left %s behind (stat: %v)", dir, err)
	}
}
