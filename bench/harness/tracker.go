package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

// tracker watches Nodes and Services and notes when each Node was first seen initialized
// (no uninitialized taint, a provider ID) and each Service first had a load balancer
// ingress. Times are when the watch event reached the harness.
type tracker struct {
	mu       sync.Mutex
	nodeInit map[string]time.Time
	svcReady map[string]time.Time
}

// startTracker starts the informers, which stop with ctx, and waits for their caches.
func startTracker(ctx context.Context, kube kubernetes.Interface) (*tracker, error) {
	t := &tracker{nodeInit: map[string]time.Time{}, svcReady: map[string]time.Time{}}
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(""))
	nodes := f.Core().V1().Nodes().Informer()
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.node,
		UpdateFunc: func(_, obj any) { t.node(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watching nodes: %w", err)
	}
	services := f.Core().V1().Services().Informer()
	if _, err := services.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.service,
		UpdateFunc: func(_, obj any) { t.service(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watching services: %w", err)
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("the %v informer did not sync", typ)
		}
	}
	return t, nil
}

func (t *tracker) node(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok || n.Spec.ProviderID == "" {
		return
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == cloudproviderapi.TaintExternalCloudProvider {
			return
		}
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.nodeInit[n.Name]; !seen {
		t.nodeInit[n.Name] = now
	}
}

func (t *tracker) service(obj any) {
	s, ok := obj.(*corev1.Service)
	if !ok || len(s.Status.LoadBalancer.Ingress) == 0 {
		return
	}
	now := time.Now()
	key := s.Namespace + "/" + s.Name
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.svcReady[key]; !seen {
		t.svcReady[key] = now
	}
}

// initialized returns when each named node was first seen initialized; nodes not yet
// initialized are missing.
func (t *tracker) initialized(names []string) map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return seen(t.nodeInit, names)
}

// allInitialized reports whether every named node has been seen initialized, without
// building the map initialized returns: scenarios poll it for thousands of nodes.
func (t *tracker) allInitialized(names []string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return allSeen(t.nodeInit, names)
}

// ready returns when each Service key first had an ingress; Services without are missing.
func (t *tracker) ready(keys []string) map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return seen(t.svcReady, keys)
}

// allReady reports whether every Service key has had an ingress.
func (t *tracker) allReady(keys []string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return allSeen(t.svcReady, keys)
}

// seen returns the times in first of the given keys; keys not in first are missing.
func seen(first map[string]time.Time, keys []string) map[string]time.Time {
	out := make(map[string]time.Time, len(keys))
	for _, k := range keys {
		if at, ok := first[k]; ok {
			out[k] = at
		}
	}
	return out
}

func allSeen(first map[string]time.Time, keys []string) bool {
	for _, k := range keys {
		if _, ok := first[k]; !ok {
			return false
		}
	}
	return true
}
