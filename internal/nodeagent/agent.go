package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Node is one simulated node the agent answers for.
type Node struct {
	// Name is the Node's name, used in answers.
	Name string
	// Address is the node's InternalIP; the agent listens on it. On Linux any address in
	// 127.0.0.0/8 works without root.
	Address netip.Addr
}

// Config is what an Agent needs.
type Config struct {
	// Client watches Services.
	Client kubernetes.Interface
	// Nodes are the nodes to answer for; names and addresses must be unique.
	Nodes []Node
	// Logger receives what the agent opens, closes and fails to open.
	Logger logr.Logger
}

// Agent serves the node ports of every Service on every node's address. Create it with
// New and run it with Run.
type Agent struct {
	client kubernetes.Interface
	nodes  []Node
	log    logr.Logger
	queue  workqueue.TypedRateLimitingInterface[string]

	mu        sync.Mutex
	listeners map[string]map[listenerKey]*listener // by Service key
	ready     chan struct{}                        // closed once the Service cache synced
}

// New checks cfg and returns an agent that does nothing until Run.
func New(cfg Config) (*Agent, error) {
	if cfg.Client == nil {
		return nil, errors.New("node agent: a Kubernetes client is required")
	}
	if len(cfg.Nodes) == 0 {
		return nil, errors.New("node agent: no nodes to answer for")
	}
	names := map[string]bool{}
	addrs := map[netip.Addr]bool{}
	for i, n := range cfg.Nodes {
		if errs := validation.IsDNS1123Subdomain(n.Name); len(errs) > 0 {
			return nil, fmt.Errorf("node agent: nodes[%d].name %q: %s", i, n.Name, errs[0])
		}
		if !n.Address.IsValid() {
			return nil, fmt.Errorf("node agent: node %s has no address", n.Name)
		}
		if names[n.Name] {
			return nil, fmt.Errorf("node agent: node %s is listed twice", n.Name)
		}
		if addrs[n.Address] {
			return nil, fmt.Errorf("node agent: address %s is given to two nodes", n.Address)
		}
		names[n.Name], addrs[n.Address] = true, true
	}
	return &Agent{
		client: cfg.Client,
		nodes:  slices.Clone(cfg.Nodes),
		log:    cfg.Logger,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 10*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodeagent"},
		),
		listeners: map[string]map[listenerKey]*listener{},
		ready:     make(chan struct{}),
	}, nil
}

// Ready returns a channel closed once the agent has seen every Service that existed
// when it started; listeners for them open right after.
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// Run watches Services and keeps the listeners in step until ctx ends, then closes
// every listener and returns. It returns an error only when the Service cache cannot
// sync; failures to open a port are logged and retried with backoff. Run must be called
// once.
func (a *Agent) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(a.client, 0)
	services := factory.Core().V1().Services()
	lister := services.Lister()
	_, err := services.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    a.enqueue,
		UpdateFunc: func(_, obj any) { a.enqueue(obj) },
		DeleteFunc: a.enqueue,
	})
	if err != nil {
		return fmt.Errorf("node agent: watch Services: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer a.closeAll()
	defer a.queue.ShutDown()

	if !cache.WaitForCacheSync(ctx.Done(), services.Informer().HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("node agent: Service cache did not sync")
	}
	close(a.ready)

	var wg sync.WaitGroup
	wg.Go(func() {
		for a.processNext(ctx, lister) {
		}
	})
	<-ctx.Done()
	a.queue.ShutDown()
	wg.Wait()
	return nil
}

func (a *Agent) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		a.log.Error(err, "Cannot key Service")
		return
	}
	a.queue.Add(key)
}

func (a *Agent) processNext(ctx context.Context, lister corelisters.ServiceLister) bool {
	key, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(key)
	if err := a.sync(ctx, lister, key); err != nil {
		a.log.Error(err, "Cannot serve node ports, will retry", "service", key)
		a.queue.AddRateLimited(key)
		return true
	}
	a.queue.Forget(key)
	return true
}

// sync makes the listeners of one Service match what it asks for.
func (a *Agent) sync(ctx context.Context, lister corelisters.ServiceLister, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	svc, err := lister.Services(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		svc = nil
	case err != nil:
		return err
	}
	want := a.wanted(svc)

	a.mu.Lock()
	defer a.mu.Unlock()
	have := a.listeners[key]
	for k, l := range have {
		if _, ok := want[k]; !ok {
			l.close()
			delete(have, k)
			a.log.Info("Closed node port", "service", key, "node", k.Node, "address", k.Addr.String(), "kind", k.Kind.String())
		}
	}
	var errs []error
	for k, info := range want {
		if l, ok := have[k]; ok {
			l.setInfo(info)
			continue
		}
		l, err := openListener(ctx, k, info)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if have == nil {
			have = map[listenerKey]*listener{}
			a.listeners[key] = have
		}
		have[k] = l
		a.log.Info("Serving node port", "service", key, "node", k.Node, "address", k.Addr.String(), "kind", k.Kind.String())
	}
	if len(have) == 0 {
		delete(a.listeners, key)
	}
	return errors.Join(errs...)
}

// wanted returns the listeners svc asks for on every node; none for nil.
func (a *Agent) wanted(svc *corev1.Service) map[listenerKey]answer {
	want := map[listenerKey]answer{}
	if svc == nil || svc.DeletionTimestamp != nil {
		return want
	}
	if svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return want
	}
	for _, n := range a.nodes {
		for _, p := range svc.Spec.Ports {
			if p.NodePort == 0 {
				continue
			}
			var kind listenerKind
			switch p.Protocol {
			case corev1.ProtocolTCP, "":
				kind = kindHTTP
			case corev1.ProtocolUDP:
				kind = kindEcho
			default:
				continue // SCTP: nothing to stand in with
			}
			k := listenerKey{Node: n.Name, Addr: netip.AddrPortFrom(n.Address, uint16(p.NodePort)), Kind: kind}
			want[k] = answer{Node: n.Name, Namespace: svc.Namespace, Service: svc.Name, Port: p.Name, ServicePort: p.Port}
		}
		if hc := svc.Spec.HealthCheckNodePort; hc != 0 && svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			k := listenerKey{Node: n.Name, Addr: netip.AddrPortFrom(n.Address, uint16(hc)), Kind: kindHealth}
			want[k] = answer{Node: n.Name, Namespace: svc.Namespace, Service: svc.Name}
		}
	}
	return want
}

// Listening returns what the agent serves right now, one "kind address (node) for
// service" line per listener, sorted.
func (a *Agent) Listening() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for svc, ls := range a.listeners {
		for k := range ls {
			out = append(out, fmt.Sprintf("%s %s (%s) for %s", k.Kind, k.Addr, k.Node, svc))
		}
	}
	slices.Sort(out)
	return out
}

// closeAll closes every listener; Run calls it on the way out.
func (a *Agent) closeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, ls := range a.listeners {
		for _, l := range ls {
			l.close()
		}
		delete(a.listeners, key)
	}
}
