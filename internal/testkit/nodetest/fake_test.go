package nodetest

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nephele-dev/nephele/cloud"
)

func TestFake(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	inst := cloud.Instance{NodeName: "n1", ProviderID: "fake://n1"}
	f := NewFake(t, []cloud.Instance{inst}, node)
	nodes := f.Informers.Core().V1().Nodes().Lister() // registers the informer, as a controller's New does
	f.Start(t)
	if _, err := nodes.Get("n1"); err != nil {
		t.Fatalf("the informers have not synced the node: %v", err)
	}
	if n := f.Node(t, "n1"); n.Name != "n1" || !f.Exists(t, "n1") {
		t.Errorf("Node(n1) = %v", n)
	}
	if f.Exists(t, "n2") {
		t.Error("Exists(n2) found a node never created")
	}
	if got, err := f.Cloud.InstanceMetadata(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: "fake://n1"}}); err != nil || got.ProviderID != "fake://n1" {
		t.Errorf("the fake cloud does not hold the instance: %+v, %v", got, err)
	}

	// WaitCached sees an update, and nil for a deleted node.
	node.Labels = map[string]string{"updated": "yes"}
	if _, err := f.Client.CoreV1().Nodes().Update(t.Context(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitCached(t, "n1", func(n *corev1.Node) bool { return n != nil && n.Labels["updated"] == "yes" })
	if err := f.Client.CoreV1().Nodes().Delete(t.Context(), "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitCached(t, "n1", func(n *corev1.Node) bool { return n == nil })

	// Run runs until the test ends; metrics are read by name.
	rounds := prometheus.NewCounter(prometheus.CounterOpts{Name: "rounds_total", Help: "h"})
	f.Metrics.MustRegister(rounds)
	inv := f.Inventory(t, nil)
	Run(t, func(ctx context.Context) error {
		for range 3 {
			rounds.Inc()
		}
		<-ctx.Done()
		return nil
	})
	f.WaitMetric(t, "rounds_total", 3)
	if got := f.Metric(t, "rounds_total", nil); got != 3 {
		t.Errorf("Metric = %v, want 3", got)
	}
	if inv == nil {
		t.Error("no inventory")
	}
}
