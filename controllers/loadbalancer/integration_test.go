package loadbalancer

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/controllers/worker"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/internal/testkit/testlog"
	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/manager/instrumented"
)

// The control plane is shared by the package's integration tests and started by the
// first one that needs it, so that the unit tests do not pay for it.
var shared = testenv.Shared{Options: controlplane.Options{Kwok: true}}

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// controlPlane returns the shared control plane (etcd, kube-apiserver and kwok managing
// every Node), starting it on first use. A missing binary fails the test.
func controlPlane(t *testing.T) *controlplane.Env { return shared.Env(t) }

// realHarness runs a controller against the shared control plane, with the fake cloud
// behind the manager's instrumented call path.
type realHarness struct {
	t     *testing.T
	env   *controlplane.Env
	cloud *fakecloud.Cloud
	ns    string
	class string
	ctrl  *Controller
}

// idleFor waits until the controller has had nothing queued and the cloud no call in
// flight for d without a break (sampled every 50ms), within the poll's deadline.
func (h *realHarness) idleFor(d time.Duration) {
	h.t.Helper()
	poll.Eventually(h.t, fmt.Sprintf("the controller to be idle for %s", d), func() error {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if n, inFlight := h.ctrl.worker.Len(), h.cloud.InFlight(); n != 0 || inFlight != 0 {
				return fmt.Errorf("busy: %d queued, %d cloud calls in flight", n, inFlight)
			}
		}
		return nil
	})
}

// newRealHarness starts a controller for one test. Each test gets its own namespace
// and, unless it tests the default class, its own load balancer class, so that
// controllers of tests that ran before never see its Services.
func newRealHarness(t *testing.T, class string, tweak func(*Config)) *realHarness {
	t.Helper()
	e := controlPlane(t)
	ns := newTestNamespace(t, e)
	// The controller sees only its test's Services (Nodes are cluster-wide), so a
	// Service a test before it left behind is never its business.
	factory := informers.NewSharedInformerFactoryWithOptions(e.Client, 0, informers.WithNamespace(ns))
	return startRealController(t, e, ns, class, factory, tweak)
}

// newTestNamespace creates a namespace for one test, named after it.
func newTestNamespace(t *testing.T, e *controlplane.Env) string {
	t.Helper()
	ctx := t.Context()
	// A random suffix keeps two runs of one test (-count=2) apart: the namespace of the
	// first may still be terminating when the second starts.
	ns := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if len(ns) > 50 {
		ns = ns[:50]
	}
	ns += "-" + strings.ToLower(rand.Text()[:5])
	if _, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	return ns
}

// startRealController runs a controller that writes to the shared control plane and
// reads its caches from factory, with the fake cloud behind the manager's instrumented
// call path.
func startRealController(t *testing.T, e *controlplane.Env, ns, class string, factory informers.SharedInformerFactory, tweak func(*Config)) *realHarness {
	t.Helper()
	ctx := t.Context()
	fc, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	ic, err := instrumented.New(fc, instrumented.Options{Timeout: time.Minute, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	lbs, ok := ic.For(manager.ServiceLBController).LoadBalancers()
	if !ok {
		t.Fatal("instrumented fake cloud has no load balancers")
	}
	broadcaster := record.NewBroadcaster(record.WithContext(context.Background()))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: e.Client.CoreV1().Events("")})
	cfg := Config{
		ControllerDeps: manager.ControllerDeps{
			Client:    e.Client,
			Informers: factory,
			Recorder:  broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: manager.ServiceLBController}),
			Logger:    testlog.New(t, 1),
			Metrics:   reg,
		},
		LoadBalancers:     lbs,
		ClusterName:       "integration",
		LoadBalancerClass: class,
		NodeBatchWindow:   time.Second,
		Retry:             worker.Retry{MinDelay: 200 * time.Millisecond, MaxDelay: 5 * time.Second},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	ctrl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	factory.Start(runCtx.Done())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		factory.Shutdown()
		broadcaster.Shutdown()
	})
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("the %v cache did not sync", typ)
		}
	}
	return &realHarness{t: t, env: e, cloud: fc, ns: ns, class: class, ctrl: ctrl}
}

// service returns a LoadBalancer Service of the harness's class in its namespace.
func (h *realHarness) service(name string, opts ...svcOpt) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}
	if h.class != "" {
		svc.Spec.LoadBalancerClass = &h.class
	}
	for _, o := range opts {
		o(svc)
	}
	return svc
}

func (h *realHarness) create(svc *corev1.Service) *corev1.Service {
	h.t.Helper()
	out, err := h.env.Client.CoreV1().Services(svc.Namespace).Create(h.t.Context(), svc, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("creating Service %s: %v", svc.Name, err)
	}
	return out
}

func (h *realHarness) get(name string) (*corev1.Service, error) {
	return h.env.Client.CoreV1().Services(h.ns).Get(context.Background(), name, metav1.GetOptions{})
}

// serviceFor finds the Service whose load balancer is lbName, in the harness's namespace.
func (h *realHarness) serviceFor(ctx context.Context, lbName string) (*corev1.Service, error) {
	list, err := h.env.Client.CoreV1().Services(h.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if LoadBalancerName(&list.Items[i]) == lbName {
			return &list.Items[i], nil
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("services"), lbName)
}

// waitIngress waits until the Service's status shows its VIP from the fake cloud.
func (h *realHarness) waitIngress(name string, deadline time.Duration) *corev1.Service {
	h.t.Helper()
	var svc *corev1.Service
	poll.Within(h.t, deadline, "status of Service "+name, func() error {
		var err error
		if svc, err = h.get(name); err != nil {
			return err
		}
		lb, ok := h.cloud.LoadBalancer(LoadBalancerName(svc))
		if !ok {
			return errors.New("no load balancer in the cloud")
		}
		if ing := svc.Status.LoadBalancer.Ingress; len(ing) != 1 || ing[0].IP != lb.VIP.String() {
			return fmt.Errorf("ingress %+v, want %s", ing, lb.VIP)
		}
		return nil
	})
	return svc
}

// events returns the Events about the named Service with reason.
func (h *realHarness) events(name, reason string) []corev1.Event {
	h.t.Helper()
	list, err := h.env.Client.CoreV1().Events(h.ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": name, "reason": reason}.String(),
	})
	if err != nil {
		h.t.Fatalf("listing events: %v", err)
	}
	return list.Items
}

// waitEvent waits for an Event about the named Service with reason and type.
func (h *realHarness) waitEvent(name, eventType, reason, mentioning string) {
	h.t.Helper()
	poll.Eventually(h.t, fmt.Sprintf("%s event %s on %s", eventType, reason, name), func() error {
		for _, ev := range h.events(name, reason) {
			if ev.Type == eventType && strings.Contains(ev.Message, mentioning) {
				return nil
			}
		}
		return errors.New("no such event")
	})
}

// testLabel marks the nodes a test created with the test's namespace.
const testLabel = "integration.nephele.dev/test"

// createNodes creates nodes concurrently and deletes them when the test ends.
func (h *realHarness) createNodes(nodes ...*corev1.Node) {
	h.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes))
	sem := make(chan struct{}, 10)
	for _, n := range nodes {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[testLabel] = h.ns
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, err := h.env.Client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
				errs <- fmt.Errorf("creating node %s: %w", n.Name, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		// One request for all of them: later tests should not see these nodes.
		err := h.env.Client.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: testLabel + "=" + h.ns})
		if err != nil {
			h.t.Errorf("deleting the test's nodes: %v", err)
		}
	})
}

// backendNames returns the backends of the load balancer, or nil if it does not exist.
func (h *realHarness) backendNames(lbName string) []string {
	lb, ok := h.cloud.LoadBalancer(lbName)
	if !ok {
		return nil
	}
	var out []string
	for _, b := range lb.Spec.Backends {
		out = append(out, b.NodeName)
	}
	return out
}

// kwokNode returns a Node for kwok to run: initialized, with an internal IP.
func kwokNode(name, ip string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels:      map[string]string{"type": "kwok"},
		},
		Spec: corev1.NodeSpec{ProviderID: "fake://" + name},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: ip},
			{Type: corev1.NodeHostName, Address: name},
		}},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func TestIntegrationLifecycle(t *testing.T) {
	// The default class: this controller serves Services without a class.
	h := newRealHarness(t, "", nil)
	h.createNodes(kwokNode("life-1", "10.10.0.1"), kwokNode("life-2", "10.10.0.2"))

	// The hook sees the Service as the apiserver has it at the moment of each cloud call.
	var mu sync.Mutex
	var problems []string
	var deletesSeen int
	h.cloud.SetHook(func(ctx context.Context, op cloud.Operation, lbName string) error {
		svc, err := h.serviceFor(ctx, lbName)
		if err != nil {
			mu.Lock()
			problems = append(problems, fmt.Sprintf("%s %s: Service not found: %v", op, lbName, err))
			mu.Unlock()
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		switch op {
		case cloud.OpEnsureLoadBalancer, cloud.OpUpdateLoadBalancerBackends:
			if !hasFinalizer(svc) {
				problems = append(problems, fmt.Sprintf("%s for %s before the finalizer was on it", op, svc.Name))
			}
		case cloud.OpEnsureLoadBalancerDeleted:
			deletesSeen++
			if !hasFinalizer(svc) {
				problems = append(problems, fmt.Sprintf("delete for %s after its finalizer was gone", svc.Name))
			}
		}
		return nil
	})
	checkProblems := func() {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if len(problems) > 0 {
			t.Fatal(strings.Join(problems, "\n"))
		}
	}

	svc := h.waitIngress(h.create(h.service("web")).Name, time.Minute)
	checkProblems()
	if !hasFinalizer(svc) {
		t.Fatalf("finalizers %v, want %s", svc.Finalizers, Finalizer)
	}
	lbName := LoadBalancerName(svc)
	poll.Eventually(t, "backends", func() error {
		got := strings.Join(h.backendNames(lbName), ",")
		if !strings.Contains(got, "life-1") || !strings.Contains(got, "life-2") {
			return errors.New("backends " + got)
		}
		return nil
	})
	lb, _ := h.cloud.LoadBalancer(lbName)
	if p := lb.Spec.Ports; len(p) != 1 || p[0].Port != 80 || p[0].NodePort != svc.Spec.Ports[0].NodePort || p[0].NodePort == 0 {
		t.Errorf("ports given to the cloud %+v, Service ports %+v", p, svc.Spec.Ports)
	}
	h.waitEvent("web", corev1.EventTypeNormal, EventEnsuringLoadBalancer, "")
	h.waitEvent("web", corev1.EventTypeNormal, EventEnsuredLoadBalancer, "")

	// Deleting the Service deletes the load balancer, then lets the Service go.
	if err := h.env.Client.CoreV1().Services(h.ns).Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "Service deletion", func() error {
		if _, err := h.get("web"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Service still there (%v)", err)
		}
		return nil
	})
	if _, ok := h.cloud.LoadBalancer(lbName); ok {
		t.Error("the Service is gone but its load balancer is still in the cloud")
	}
	checkProblems()
	mu.Lock()
	if deletesSeen == 0 {
		t.Error("no delete call saw the Service with its finalizer")
	}
	mu.Unlock()
	h.waitEvent("web", corev1.EventTypeNormal, EventDeletingLoadBalancer, "")
	h.waitEvent("web", corev1.EventTypeNormal, EventDeletedLoadBalancer, "")

	// Turning a Service into a ClusterIP deletes the load balancer, removes the
	// finalizer and clears the status.
	svc = h.waitIngress(h.create(h.service("api")).Name, time.Minute)
	lbName = LoadBalancerName(svc)
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	if _, err := h.env.Client.CoreV1().Services(h.ns).Update(t.Context(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("changing the type to ClusterIP: %v", err)
	}
	poll.Eventually(t, "cleanup after the type change", func() error {
		svc, err := h.get("api")
		switch {
		case err != nil:
			return err
		case hasFinalizer(svc):
			return errors.New("finalizer still there")
		case len(svc.Status.LoadBalancer.Ingress) != 0:
			return fmt.Errorf("status still %+v", svc.Status.LoadBalancer)
		}
		return nil
	})
	if _, ok := h.cloud.LoadBalancer(lbName); ok {
		t.Error("the load balancer outlived the type change")
	}
	checkProblems()
}

// TestIntegrationTwoClasses runs two controllers of different load balancer classes,
// each with a cloud of its own, on one namespace of a real apiserver: each serves and
// cleans up its own Services and never touches the other's, although both use the
// shared cleanup finalizer (KEP-1959).
func TestIntegrationTwoClasses(t *testing.T) {
	const classA, classB = "a.integration.nephele.dev/lb", "b.integration.nephele.dev/lb"
	e := controlPlane(t)
	ns := newTestNamespace(t, e)
	start := func(class string) *realHarness {
		factory := informers.NewSharedInformerFactoryWithOptions(e.Client, 0, informers.WithNamespace(ns))
		return startRealController(t, e, ns, class, factory, nil)
	}
	a, b := start(classA), start(classB)
	a.createNodes(kwokNode("classes-1", "10.60.0.1"))
	sa := a.waitIngress(a.create(a.service("sa")).Name, time.Minute)
	sb := b.waitIngress(b.create(b.service("sb")).Name, time.Minute)
	for _, side := range []struct {
		h     *realHarness
		name  string
		class string
	}{{a, "sa", classA}, {b, "sb", classB}} {
		poll.Eventually(t, "the finalizer and annotation of "+side.name, func() error {
			svc, err := side.h.get(side.name)
			switch {
			case err != nil:
				return err
			case !hasFinalizer(svc) || !annotatedFor(svc, side.class):
				return fmt.Errorf("finalizers %v, annotations %v", svc.Finalizers, svc.Annotations)
			case len(svc.Status.LoadBalancer.Ingress) == 0:
				return errors.New("no status")
			}
			return nil
		})
	}

	// Deleting sb: its controller deletes its load balancer and lets it go.
	if err := e.Client.CoreV1().Services(ns).Delete(t.Context(), "sb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "sb to be deleted", func() error {
		if _, err := b.get("sb"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	if _, ok := b.cloud.LoadBalancer(LoadBalancerName(sb)); ok {
		t.Error("sb is gone but its load balancer is still in its cloud")
	}

	// Turning sa into a ClusterIP: the apiserver clears its class, the annotation says
	// whose the finalizer is, and its controller cleans up.
	sa.Spec.Type = corev1.ServiceTypeClusterIP
	if _, err := e.Client.CoreV1().Services(ns).Update(t.Context(), sa, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("changing the type of sa to ClusterIP: %v", err)
	}
	poll.Eventually(t, "sa cleaned up", func() error {
		svc, err := a.get("sa")
		if err != nil {
			return err
		}
		if _, annotated := svc.Annotations[ClassAnnotation]; annotated || hasFinalizer(svc) || len(svc.Status.LoadBalancer.Ingress) != 0 {
			return fmt.Errorf("finalizers %v, annotations %v, status %+v", svc.Finalizers, svc.Annotations, svc.Status.LoadBalancer)
		}
		return nil
	})
	if _, ok := a.cloud.LoadBalancer(LoadBalancerName(sa)); ok {
		t.Error("sa's load balancer outlived the type change")
	}

	// Each cloud was asked to delete its own Service's load balancer only.
	for _, side := range []struct {
		h   *realHarness
		own *corev1.Service
	}{{a, sa}, {b, sb}} {
		for _, c := range side.h.cloud.CallLog() {
			if c.Op == cloud.OpEnsureLoadBalancerDeleted && c.Subject != LoadBalancerName(side.own) {
				t.Errorf("the controller of %s deleted load balancer %s", side.own.Name, c.Subject)
			}
		}
	}
}

func TestIntegrationNodeBurst(t *testing.T) {
	const services, nodes = 20, 50
	h := newRealHarness(t, "integration.nephele.dev/burst", func(c *Config) {
		// A window wider than any pause between the burst's creations, even on a busy
		// machine: the hold then ends once, after the burst.
		c.NodeBatchWindow = 2 * time.Second
	})
	var lbNames []string
	for i := range services {
		h.create(h.service(fmt.Sprintf("web-%02d", i)))
	}
	for i := range services {
		svc := h.waitIngress(fmt.Sprintf("web-%02d", i), 2*time.Minute)
		lbNames = append(lbNames, LoadBalancerName(svc))
	}
	// Let the ensures settle, then count from here.
	h.idleFor(3 * time.Second)
	before := map[string]fakecloud.LoadBalancer{}
	for _, n := range lbNames {
		before[n], _ = h.cloud.LoadBalancer(n)
	}

	var burst []*corev1.Node
	for i := range nodes {
		burst = append(burst, kwokNode(fmt.Sprintf("burst-%02d", i), fmt.Sprintf("10.20.0.%d", i+1)))
	}
	h.createNodes(burst...)
	poll.Within(t, 2*time.Minute, "every load balancer to get every new node", func() error {
		for _, n := range lbNames {
			got := 0
			for _, b := range h.backendNames(n) {
				if strings.HasPrefix(b, "burst-") {
					got++
				}
			}
			if got != nodes {
				return fmt.Errorf("load balancer %s has %d of %d new nodes", n, got, nodes)
			}
		}
		return nil
	})
	// Give a straggling batch (and kwok's status updates) time to show up: two batch
	// windows and more with nothing queued and no call in flight.
	h.idleFor(5 * time.Second)
	// kwok ran the nodes (and so updated their status) while the controller watched.
	ready := 0
	list, err := h.env.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: testLabel + "=" + h.ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range list.Items {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	most := 0
	for _, n := range lbNames {
		lb, _ := h.cloud.LoadBalancer(n)
		ensures, updates := lb.Ensures-before[n].Ensures, lb.BackendUpdates-before[n].BackendUpdates
		most = max(most, ensures+updates)
		// The batcher holds while the burst goes on: one update per load balancer.
		if ensures+updates > 1 {
			t.Errorf("load balancer %s: %d ensures and %d backend updates for one burst of %d nodes, want at most 1 call", n, ensures, updates, nodes)
		}
		if ensures != 0 {
			t.Errorf("load balancer %s: node joins cost %d EnsureLoadBalancer calls, want backend updates only", n, ensures)
		}
	}
	t.Logf("%d nodes joined (%d Ready by kwok); at most %d cloud calls per load balancer; %d backend updates in all",
		nodes, ready, most, h.cloud.Calls(cloud.OpUpdateLoadBalancerBackends))
}

func TestIntegrationHungLoadBalancer(t *testing.T) {
	const hang = 30 * time.Second
	h := newRealHarness(t, "integration.nephele.dev/hang", nil)
	h.createNodes(kwokNode("hang-1", "10.30.0.1"))

	var hangStarted, hangEnded atomicTime
	h.cloud.SetHook(func(ctx context.Context, op cloud.Operation, lbName string) error {
		svc, err := h.serviceFor(ctx, lbName)
		if err != nil || svc.Name != "slow" {
			return nil
		}
		hangStarted.setOnce(time.Now())
		defer hangEnded.setOnce(time.Now())
		t := time.NewTimer(hang)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	})
	h.create(h.service("slow"))
	poll.Eventually(t, "the slow load balancer's call to hang", func() error {
		if hangStarted.get().IsZero() {
			return errors.New("no call yet")
		}
		return nil
	})
	h.create(h.service("fast"))
	// Generous deadline: the point is only that the fast one does not wait for the hang.
	h.waitIngress("fast", hang-5*time.Second)
	if ended := hangEnded.get(); !ended.IsZero() {
		t.Fatalf("the fast Service got its status only after the slow call ended (%s after it started)", ended.Sub(hangStarted.get()))
	}
	t.Logf("fast Service served %s into the slow call's hang", time.Since(hangStarted.get()).Round(time.Millisecond))
}

// atomicTime is a time set once and read from other goroutines.
type atomicTime struct {
	mu sync.Mutex
	t  time.Time
}

func (a *atomicTime) setOnce(t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.t.IsZero() {
		a.t = t
	}
}

func (a *atomicTime) get() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.t
}

func TestIntegrationInvalidServices(t *testing.T) {
	h := newRealHarness(t, "integration.nephele.dev/invalid", nil)
	h.createNodes(kwokNode("invalid-1", "10.40.0.1"))
	const problem = `annotation example.com/lb-size: "huge" is not one of small, large`
	h.cloud.SetHook(func(ctx context.Context, op cloud.Operation, lbName string) error {
		svc, err := h.serviceFor(ctx, lbName)
		if err == nil && svc.Annotations["example.com/lb-size"] == "huge" {
			return cloudInvalid(problem)
		}
		if err == nil && len(svc.Spec.LoadBalancerSourceRanges) > 0 && strings.Contains(svc.Spec.LoadBalancerSourceRanges[0], ":") {
			return cloudInvalid("spec.loadBalancerSourceRanges: IPv6 ranges are not supported by this cloud")
		}
		return nil
	})
	h.create(h.service("huge", withAnnotation("example.com/lb-size", "huge")))
	h.create(h.service("v6range", withSourceRanges("2001:db8::/32")))
	h.create(h.service("fine", withSourceRanges("203.0.113.0/24")))

	h.waitIngress("fine", time.Minute)
	h.waitEvent("huge", corev1.EventTypeWarning, EventSyncLoadBalancerFailed, "lb-size")
	h.waitEvent("v6range", corev1.EventTypeWarning, EventSyncLoadBalancerFailed, "IPv6 ranges")
	fine, err := h.get("fine")
	if err != nil {
		t.Fatal(err)
	}
	lb, _ := h.cloud.LoadBalancer(LoadBalancerName(fine))
	if fmt.Sprint(lb.Spec.SourceRanges) != "[203.0.113.0/24]" {
		t.Errorf("source ranges given to the cloud: %v", lb.Spec.SourceRanges)
	}
	// Retried with backoff: more than one attempt for the invalid one, and once it is
	// fixed it gets a load balancer.
	poll.Eventually(t, "retries of the invalid Service", func() error {
		if n := h.cloud.CallsWithResult(cloud.OpEnsureLoadBalancer, "invalid"); n < 4 {
			return fmt.Errorf("%d invalid attempts", n)
		}
		return nil
	})
	huge, err := h.get("huge")
	if err != nil {
		t.Fatal(err)
	}
	huge.Annotations["example.com/lb-size"] = "large"
	if _, err := h.env.Client.CoreV1().Services(h.ns).Update(t.Context(), huge, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitIngress("huge", time.Minute)
	for _, name := range []string{"huge", "v6range"} {
		svc, err := h.get(name)
		if err != nil {
			t.Fatal(err)
		}
		if !hasFinalizer(svc) {
			t.Errorf("Service %s has no finalizer although the cloud was called for it", name)
		}
	}
}

func TestIntegrationBackendEligibility(t *testing.T) {
	h := newRealHarness(t, "integration.nephele.dev/eligibility", nil)
	uninit := kwokNode("elig-uninit", "10.50.0.4", withoutProviderID(), withTaint(cloudproviderapi.TaintExternalCloudProvider))
	h.createNodes(
		kwokNode("elig-good", "10.50.0.1"),
		kwokNode("elig-excluded", "10.50.0.2", withLabel(corev1.LabelNodeExcludeBalancers, "true")),
		kwokNode("elig-autoscaler", "10.50.0.3", withTaint(TaintToBeDeleted)),
		uninit,
	)
	svc := h.waitIngress(h.create(h.service("web")).Name, time.Minute)
	lbName := LoadBalancerName(svc)
	eligNodes := func() []string {
		var out []string
		for _, b := range h.backendNames(lbName) {
			if strings.HasPrefix(b, "elig-") {
				out = append(out, b)
			}
		}
		return out
	}
	// The autoscaler's taint keeps a node until it is deleted (KEP-3458).
	poll.Eventually(t, "backends", func() error {
		if got := fmt.Sprint(eligNodes()); got != "[elig-autoscaler elig-good]" {
			return errors.New("backends " + got)
		}
		return nil
	})

	// The cloud node controller initializes the node: provider ID set, taint removed.
	n, err := h.env.Client.CoreV1().Nodes().Get(t.Context(), uninit.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.ProviderID = "fake://" + n.Name
	n.Spec.Taints = nil
	if _, err := h.env.Client.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "the initialized node to join", func() error {
		if got := fmt.Sprint(eligNodes()); got != "[elig-autoscaler elig-good elig-uninit]" {
			return errors.New("backends " + got)
		}
		return nil
	})
	lb, _ := h.cloud.LoadBalancer(lbName)
	if lb.Ensures != 1 {
		t.Errorf("load balancer ensured %d times, want 1 (the join is a backend update)", lb.Ensures)
	}
}

func cloudInvalid(msg string) error { return cloud.Invalidf("%s", msg) }
