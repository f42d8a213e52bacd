package smoke

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/scheme"
)

// The refusal checks try what docs/security.md says nobody may do, from where an
// attacker would be: an unprivileged user of the machine and a pod. Each attempt must
// be refused while the cluster keeps working, which the checks around them show.

// unprivileged is the user the checks act as: nobody, whom no file of a cluster names.
func unprivileged() (*syscall.Credential, error) {
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("the unprivileged user: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user nobody's uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user nobody's gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// asNobody runs argv as nobody in / and says whether it succeeded, with its output.
func asNobody(ctx context.Context, cred *syscall.Credential, argv ...string) (bool, string) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.CombinedOutput()
	return err == nil, strings.TrimSpace(string(out))
}

// nobodyReadsNothing: the unprivileged user reads none of the cluster's credentials
// (the admin kubeconfig, the cloud's tokens and state, etcd's and the control plane's
// keys) and plants nothing in the state directory: no link where the lock or a journal
// would be, no forged journal for the next start to act on as root.
func (s *smoke) nobodyReadsNothing(ctx context.Context) (string, error) {
	cred, err := unprivileged()
	if err != nil {
		return "", err
	}
	// A refusal counts only if nobody can run anything at all: otherwise every attempt
	// below would fail for that reason alone.
	if ok, out := asNobody(ctx, cred, "true"); !ok {
		return "", fmt.Errorf("cannot run a program as user nobody (uid %d): %s", cred.Uid, out)
	}
	cloudDir := filepath.Dir(s.c.CloudTokenFile)
	reads := []string{s.c.Env.Kubeconfig, s.c.CloudTokenFile, s.c.CCMTokenFile, filepath.Join(cloudDir, "state.db")}
	var allowed []string
	for _, f := range reads {
		if ok, _ := asNobody(ctx, cred, "cat", f); ok {
			allowed = append(allowed, "read "+f)
		}
	}
	if ok, _ := asNobody(ctx, cred, "ls", s.c.Env.Dir); ok {
		allowed = append(allowed, "list "+s.c.Env.Dir+" (etcd's and the control plane's keys)")
	}
	hostDir := filepath.Join(s.cfg.Dir, "hosts")
	link, journal := filepath.Join(s.cfg.Dir, "nephele-smoke-planted"), filepath.Join(hostDir, "nephele-smoke-journal.json")
	defer func() { _, _ = os.Remove(link), os.Remove(journal) }()
	if ok, _ := asNobody(ctx, cred, "ln", "-s", "/etc/shadow", link); ok {
		allowed = append(allowed, "plant a link in the state directory")
	}
	if ok, _ := asNobody(ctx, cred, "sh", "-c", `echo '{"version":2}' > "$1"`, "sh", journal); ok {
		allowed = append(allowed, "plant a journal in the hosts directory")
	}
	if len(allowed) > 0 {
		return "", fmt.Errorf("user nobody (uid %d) could %s", cred.Uid, strings.Join(allowed, ", "))
	}
	return fmt.Sprintf("user nobody (uid %d): %d credentials unreadable, %s unlistable, nothing planted in %s or %s",
		cred.Uid, len(reads), s.c.Env.Dir, s.cfg.Dir, hostDir), nil
}

// storeRefusesStrangers: etcd answers nothing without a certificate of its own CA, on
// TLS or plain HTTP, and a pod cannot even connect to it (loopback of the machine).
func (s *smoke) storeRefusesStrangers(ctx context.Context) (string, error) {
	u, err := url.Parse(s.c.Env.EtcdURL)
	if err != nil {
		return "", err
	}
	hc := &http.Client{Timeout: s.http.Timeout, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true,
		// Whoever etcd is, it must not answer a client without a certificate.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
	}}
	// /version answers 200 to every client etcd lets in.
	for _, scheme := range []string{"https", "http"} {
		code, err := s.status(ctx, hc, http.MethodGet, scheme+"://"+u.Host+"/version")
		if err == nil && code == http.StatusOK {
			return "", fmt.Errorf("etcd served %s without a client certificate: %d", scheme, code)
		}
	}
	_, port, _ := net.SplitHostPort(u.Host)
	pod, err := s.attackerPod(ctx)
	if err != nil {
		return "", err
	}
	for _, host := range []string{"127.0.0.1", s.c.Gateway.String()} {
		target := "https://" + net.JoinHostPort(host, port) + "/version"
		if code, answered, err := s.podStatus(ctx, pod, http.MethodGet, target); err != nil {
			return "", err
		} else if answered {
			return "", fmt.Errorf("pod %s reached etcd at %s: %d", pod, target, code)
		}
	}
	return fmt.Sprintf("etcd at %s: nothing served without its client certificate; pod %s reaches no etcd at 127.0.0.1 or %s", u.Host, pod, s.c.Gateway), nil
}

// registryRefusesPushes: the pull listener takes no push or delete from the machine or a
// pod, and the push listener none without nephele up's token.
func (s *smoke) registryRefusesPushes(ctx context.Context) (string, error) {
	const uploads = "/v2/nephele.local/pause/blobs/uploads/"
	pull, push := "http://"+s.c.Registry.Addr(), "http://"+s.c.Registry.PushAddr()
	want := []struct {
		method, url string
		code        int
	}{
		{http.MethodPost, pull + uploads, http.StatusMethodNotAllowed},
		{http.MethodDelete, pull + "/v2/nephele.local/pause/manifests/dev", http.StatusMethodNotAllowed},
		{http.MethodPost, push + uploads, http.StatusUnauthorized},
	}
	for _, w := range want {
		code, err := s.status(ctx, s.http, w.method, w.url)
		if err != nil {
			return "", err
		}
		if code != w.code {
			return "", fmt.Errorf("%s %s answered %d, want %d", w.method, w.url, code, w.code)
		}
	}
	pod, err := s.attackerPod(ctx)
	if err != nil {
		return "", err
	}
	fromPod, err := s.podRefused(ctx, pod, http.MethodPost, pull+uploads, http.StatusMethodNotAllowed)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("push and delete on %s: 405; push on %s without the token: 401; from pod %s: %s", pull, push, pod, fromPod), nil
}

// cloudRefusesTheCCMsCredential: the CCM's token reads instances (its role) but makes
// no instance, whose boot command would run as root here, and sets no fault; a pod with
// no token gets nothing.
func (s *smoke) cloudRefusesTheCCMsCredential(ctx context.Context) (string, error) {
	token, err := os.ReadFile(s.c.CCMTokenFile)
	if err != nil {
		return "", err
	}
	ca, err := os.ReadFile(s.c.CloudCAFile)
	if err != nil {
		return "", err
	}
	ccm, err := client.New(s.c.CloudURL, strings.TrimSpace(string(token)), client.WithCA(ca), client.WithUserAgent("nephele-smoke-attacker"))
	if err != nil {
		return "", err
	}
	insts, err := ccm.ListAllInstances(ctx, 0)
	if err != nil {
		return "", fmt.Errorf("the CCM's token lists no instances: %w", err)
	}
	inst, err := ccm.CreateInstance(ctx, api.InstanceSpec{Name: "nephele-smoke-attacker", Kind: api.InstanceHost, BootCommand: []string{"/bin/true"}})
	if !forbidden(err) {
		// The cluster must not keep what the attack made.
		if err == nil {
			_ = s.c.Cloud.DeleteInstance(context.WithoutCancel(ctx), inst.ID)
		}
		return "", fmt.Errorf("creating a host with the CCM's token: %v, want 403", err)
	}
	if err := ccm.PutFault(ctx, api.Fault{Operation: "*", Outage: true}); !forbidden(err) {
		if err == nil {
			_ = s.c.Cloud.SetFaults(context.WithoutCancel(ctx), nil)
		}
		return "", fmt.Errorf("setting a fault with the CCM's token: %v, want 403", err)
	}
	pod, err := s.attackerPod(ctx)
	if err != nil {
		return "", err
	}
	var fromPod string
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		if fromPod, err = s.podRefused(ctx, pod, method, s.c.CloudURL+"/v1/instances", http.StatusUnauthorized); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("the CCM's token lists %d instances; creating a host and setting a fault: 403; pod %s without a token: %s", len(insts), pod, fromPod), nil
}

func forbidden(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.StatusCode == http.StatusForbidden
}

// status sends method to target with hc and returns the answer's status code.
func (s *smoke) status(ctx context.Context, hc *http.Client, method, target string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, nil
}

// attackerPod is a running demo pod the checks attack from.
func (s *smoke) attackerPod(ctx context.Context) (string, error) {
	pods, err := s.readyPods(ctx)
	if err != nil {
		return "", err
	}
	if len(pods) == 0 {
		return "", errors.New("no demo pod is ready to attack from")
	}
	return pods[0].Name, nil
}

// podRefused sends method to target from pod and returns how it was refused: with want,
// or with no answer at all (where the pod's network does not reach the listener). Any
// other answer is an error.
func (s *smoke) podRefused(ctx context.Context, pod, method, target string, want int) (string, error) {
	code, answered, err := s.podStatus(ctx, pod, method, target)
	switch {
	case err != nil:
		return "", err
	case !answered:
		return "no answer", nil
	case code != want:
		return "", fmt.Errorf("pod %s: %s %s answered %d, want %d or no answer", pod, method, target, code, want)
	}
	return strconv.Itoa(code), nil
}

// podStatus sends method to target from pod (demo-http status) and says whether an
// answer came, and its status code; an error is kubectl's or the probe's own.
func (s *smoke) podStatus(ctx context.Context, pod, method, target string) (int, bool, error) {
	out, err := s.kubectl(ctx, "exec", pod, "--", "/demo-http", "status", method, target)
	if err != nil {
		// The probe's exit 1 (kubectl exits with the command's code): no answer came
		// (refused, unreachable, or a TLS handshake the listener refused).
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 1 && strings.Contains(err.Error(), "demo-http: ") {
			return 0, false, nil
		}
		return 0, false, err
	}
	code, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return 0, false, fmt.Errorf("pod %s: demo-http status %s %s printed %q", pod, method, target, out)
	}
	return code, true, nil
}

// operatorCopiesNoForeignSecret: naming a Secret outside the operator's config namespace
// in the CloudControllerManager (what an editor of it would do to read kube-system's
// Secrets through the CCM's image) is refused with SourceNotAllowed and copies nothing;
// naming the cloud config again syncs it, and the CCM keeps running throughout.
func (s *smoke) operatorCopiesNoForeignSecret(ctx context.Context) (string, error) {
	cl, err := crclient.New(s.c.Env.Config, crclient.Options{Scheme: scheme.New()})
	if err != nil {
		return "", err
	}
	const victimData = "stolen: the victim's secret"
	victim := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "nephele-smoke-victim", Namespace: "kube-system"},
		StringData: map[string]string{"cloud.conf": victimData}}
	if err := cl.Create(ctx, victim); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	defer func() { _ = cl.Delete(context.WithoutCancel(ctx), victim) }()

	var ccm v1alpha1.CloudControllerManager
	if err := cl.Get(ctx, crclient.ObjectKey{Name: v1alpha1.SingletonName}, &ccm); err != nil {
		return "", err
	}
	legit := ccm.Spec.CloudConfig.DeepCopy()
	setSource := func(src *v1alpha1.ConfigSource) error {
		var cur v1alpha1.CloudControllerManager
		if err := cl.Get(ctx, crclient.ObjectKey{Name: v1alpha1.SingletonName}, &cur); err != nil {
			return err
		}
		patched := cur.DeepCopy()
		patched.Spec.CloudConfig = src
		return cl.Patch(ctx, patched, crclient.MergeFrom(&cur))
	}
	synced := func(want metav1.ConditionStatus, reason string) error {
		return s.eventually(ctx, func(ctx context.Context) error {
			var cur v1alpha1.CloudControllerManager
			if err := cl.Get(ctx, crclient.ObjectKey{Name: v1alpha1.SingletonName}, &cur); err != nil {
				return err
			}
			c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionCloudConfigSynced)
			if c == nil || c.Status != want || (reason != "" && c.Reason != reason) || c.ObservedGeneration != cur.Generation {
				return fmt.Errorf("%s is %+v, want %s %s", v1alpha1.ConditionCloudConfigSynced, c, want, reason)
			}
			return nil
		})
	}
	if err := setSource(&v1alpha1.ConfigSource{Kind: v1alpha1.SourceSecret, Namespace: victim.Namespace, Name: victim.Name, Key: "cloud.conf"}); err != nil {
		return "", err
	}
	refused := synced(metav1.ConditionFalse, "SourceNotAllowed")
	// Copies are looked for before the real source is named again, which would overwrite one.
	copied := copiesOf(ctx, cl, victim, victimData)
	// Whatever happened, the cluster gets its cloud config back.
	if err := setSource(legit); err != nil {
		return "", errors.Join(refused, copied, err)
	}
	if refused != nil || copied != nil {
		return "", fmt.Errorf("naming Secret %s/%s: %w", victim.Namespace, victim.Name, errors.Join(refused, copied))
	}
	if err := synced(metav1.ConditionTrue, ""); err != nil {
		return "", fmt.Errorf("after naming %s/%s again: %w", legit.Namespace, legit.Name, err)
	}
	return fmt.Sprintf("Secret %s/%s named in the CloudControllerManager: SourceNotAllowed, copied nowhere; %s/%s synced again", victim.Namespace, victim.Name, legit.Namespace, legit.Name), nil
}

// copiesOf returns an error naming every Secret or ConfigMap but victim that holds data.
func copiesOf(ctx context.Context, cl crclient.Client, victim *corev1.Secret, data string) error {
	var secrets corev1.SecretList
	var maps corev1.ConfigMapList
	if err := cl.List(ctx, &secrets); err != nil {
		return err
	}
	if err := cl.List(ctx, &maps); err != nil {
		return err
	}
	var found []string
	for _, sec := range secrets.Items {
		for k, v := range sec.Data {
			if strings.Contains(string(v), data) && (sec.Namespace != victim.Namespace || sec.Name != victim.Name) {
				found = append(found, fmt.Sprintf("Secret %s/%s (key %s)", sec.Namespace, sec.Name, k))
			}
		}
	}
	for _, cm := range maps.Items {
		for k, v := range cm.Data {
			if strings.Contains(v, data) {
				found = append(found, fmt.Sprintf("ConfigMap %s/%s (key %s)", cm.Namespace, cm.Name, k))
			}
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("the victim's data was copied to %s", strings.Join(found, ", "))
	}
	return nil
}
