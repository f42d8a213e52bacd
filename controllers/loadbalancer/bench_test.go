package loadbalancer

import (
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/internal/testkit/eventlog"
	"github.com/nephele-dev/nephele/manager"
)

const (
	benchNodes    = 5000
	benchServices = 1000
)

// benchController returns a controller that knows benchNodes eligible nodes and manages
// benchServices load balancers whose backends are up to date, and the nodes.
func benchController(b *testing.B) (*Controller, []*corev1.Node) {
	b.Helper()
	fc, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		b.Fatal(err)
	}
	client := fake.NewClientset()
	c, err := New(Config{
		ControllerDeps: manager.ControllerDeps{
			Client:    client,
			Informers: informers.NewSharedInformerFactory(client, 0),
			Recorder:  &eventlog.Log{},
			Logger:    logr.Discard(),
		},
		LoadBalancers: fc,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.worker.ShutDown)
	nodes := make([]*corev1.Node, benchNodes)
	for i := range nodes {
		nodes[i] = newNode(fmt.Sprintf("node-%05d", i), withIP(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&0xff, i&0xff)))
		c.nodeChanged(nodes[i])
	}
	applied := c.backends.current().hash
	for i := range benchServices {
		c.setState(fmt.Sprintf("ns/svc-%04d", i), lbState{backends: applied})
	}
	// The informer's initial adds left a wake-up; nobody runs the batcher here.
	select {
	case <-c.nodesChanged:
	default:
	}
	return c, nodes
}

// BenchmarkNodeEvent measures what one node event costs the controller at 5,000 nodes
// and 1,000 load balancers, cloud calls aside.
func BenchmarkNodeEvent(b *testing.B) {
	// A heartbeat: the node's status changes, nothing a load balancer sees does.
	b.Run("heartbeat", func(b *testing.B) {
		c, nodes := benchController(b)
		n := nodes[benchNodes/2].DeepCopy()
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		b.ReportAllocs()
		for b.Loop() {
			c.nodeChanged(n)
		}
		if c.worker.Len() != 0 || len(c.nodesChanged) != 0 {
			b.Fatal("a heartbeat queued work")
		}
	})

	// A node's address changes: the event updates the set, the batch compares every
	// load balancer's applied set with it and queues all 1,000, and the workers take
	// them off the queue (their cloud calls left out) and record the new set.
	b.Run("diff", func(b *testing.B) {
		c, nodes := benchController(b)
		a, z := nodes[benchNodes/2].DeepCopy(), nodes[benchNodes/2].DeepCopy()
		z.Status.Addresses[0].Address = "192.168.0.1"
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			n := a
			if i%2 == 0 {
				n = z
			}
			i++
			c.nodeChanged(n)
			<-c.nodesChanged
			if got := c.queueChangedBackends(); got != benchServices {
				b.Fatalf("queued %d load balancers, want %d", got, benchServices)
			}
			current := c.backends.currentHash()
			c.worker.Drain(func(k string) {
				c.mu.Lock()
				c.states[k].backends = current
				c.mu.Unlock()
			})
		}
	})

	// The sorted backend list the workers pass to the cloud, built once per batch
	// and shared by every load balancer.
	b.Run("snapshot", func(b *testing.B) {
		c, nodes := benchController(b)
		a, z := nodes[benchNodes/2].DeepCopy(), nodes[benchNodes/2].DeepCopy()
		z.Status.Addresses[0].Address = "192.168.0.1"
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			n := a
			if i%2 == 0 {
				n = z
			}
			i++
			c.backends.update(n.Name, n)
			if len(c.backends.current().backends) != benchNodes {
				b.Fatal("wrong backend count")
			}
		}
	})

	// A node change that affects no load balancer's backends (an excluded node): the
	// batch compares and queues nothing.
	b.Run("no-op-batch", func(b *testing.B) {
		c, _ := benchController(b)
		b.ReportAllocs()
		for b.Loop() {
			if got := c.queueChangedBackends(); got != 0 {
				b.Fatalf("queued %d", got)
			}
		}
	})
}
