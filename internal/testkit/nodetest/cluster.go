package nodetest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/internal/testkit/metrictest"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
	"github.com/nephele-dev/nephele/manager/inventory"
)

// Cluster is a node controller's world in an integration test: its test's share of a
// real control plane (a Scope), its own fake cloud and metrics registry. Its methods
// fail the test they were made for.
type Cluster struct {
	// Scope labels the test's Nodes, holds the informers that see only them and records
	// Events to the API server. Its cleanup deletes the Nodes.
	Scope *testenv.Scope
	// Client talks to the real API server.
	Client kubernetes.Interface
	// Cloud is the test's own fake cloud.
	Cloud *fakecloud.Cloud
	// Metrics is the registry the controller registers its metrics with.
	Metrics *prometheus.Registry

	t      *testing.T
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewCluster returns test t's share of the control plane client talks to; its Nodes
// carry the label labelKey. What Inventory and Start run stops when the test ends,
// before the Scope deletes the Nodes.
func NewCluster(t *testing.T, client kubernetes.Interface, labelKey string) *Cluster {
	t.Helper()
	scope := testenv.NewScope(t, client, labelKey)
	fc, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Scope: scope, Client: client, Cloud: fc, Metrics: prometheus.NewRegistry(), t: t}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	// Registered after the Scope's cleanup, so it runs first.
	t.Cleanup(func() {
		c.cancel()
		c.wg.Wait()
	})
	return c
}

// Name returns the name of the test's node short: unique to the test.
func (c *Cluster) Name(short string) string { return c.Scope.ID + "-" + short }

// Labels returns the labels that put a Node in the test's share.
func (c *Cluster) Labels() map[string]string { return c.Scope.Labels() }

// Inventory returns an inventory of the fake cloud, running until the test ends.
func (c *Cluster) Inventory() *inventory.Inventory {
	inv := inventory.New(c.Cloud)
	c.wg.Go(func() { inv.Run(c.ctx) })
	return inv
}

// Start starts the Scope's informers and runs run (a controller's Run) until the test
// ends, failing the test if it returns an error.
func (c *Cluster) Start(run func(context.Context) error) {
	c.Scope.Informers.Start(c.ctx.Done())
	c.wg.Go(func() {
		if err := run(c.ctx); err != nil {
			c.t.Errorf("Run: %v", err)
		}
	})
}

// Node reads node short from the API server, failing the test when there is none.
func (c *Cluster) Node(short string) *corev1.Node {
	c.t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(c.t.Context(), c.Name(short), metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("reading node %s: %v", c.Name(short), err)
	}
	return n
}

// Get reads node short from the API server; false when there is none.
func (c *Cluster) Get(short string) (*corev1.Node, bool) {
	c.t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(c.t.Context(), c.Name(short), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		c.t.Fatalf("reading node %s: %v", c.Name(short), err)
	}
	return n, true
}

// Count returns how many of the test's Nodes the API server holds.
func (c *Cluster) Count() int {
	c.t.Helper()
	list, err := c.Client.CoreV1().Nodes().List(c.t.Context(), metav1.ListOptions{LabelSelector: c.Scope.Selector()})
	if err != nil {
		c.t.Fatalf("listing nodes: %v", err)
	}
	return len(list.Items)
}

// Events returns, per short name of the test's nodes, the messages of the Events with
// reason about it; the names are sorted.
func (c *Cluster) Events(reason string) map[string][]string {
	c.t.Helper()
	list, err := c.Client.CoreV1().Events(metav1.NamespaceDefault).List(c.t.Context(), metav1.ListOptions{
		FieldSelector: fields.Set{"reason": reason}.String(),
	})
	if err != nil {
		c.t.Fatalf("listing %s events: %v", reason, err)
	}
	out := map[string][]string{}
	for _, e := range list.Items {
		if short, ok := strings.CutPrefix(e.InvolvedObject.Name, c.Scope.ID+"-"); ok {
			out[short] = append(out[short], e.Message)
		}
	}
	return out
}

// EventNodes returns the sorted short names of the test's nodes with an Event of
// reason.
func (c *Cluster) EventNodes(reason string) []string {
	c.t.Helper()
	var names []string
	for short := range c.Events(reason) {
		names = append(names, short)
	}
	slices.Sort(names)
	return names
}

// Metric returns the value of metric name with labels in Metrics (see metrictest.Value).
func (c *Cluster) Metric(name string, labels map[string]string) float64 {
	c.t.Helper()
	return metrictest.Value(c.t, c.Metrics, name, labels)
}

// WaitMetric waits until metric name (all its series) reaches want.
func (c *Cluster) WaitMetric(name string, want float64) {
	c.t.Helper()
	waitMetric(c.t, c.Metrics, name, want)
}
