package instrumented

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/internal/testkit/metrictest"
)

// stubFence is a Fence a test opens and closes.
type stubFence struct {
	mu       sync.Mutex
	closesAt time.Time
	closed   bool
	opened   int // how many times Open was asked
}

func (f *stubFence) Open() (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opened++
	if f.closed {
		return time.Time{}, errors.New("test fence closed: " + cloud.ErrFenced.Error())
	}
	return f.closesAt, nil
}

func (f *stubFence) set(closesAt time.Time, closed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closesAt, f.closed = closesAt, closed
}

func TestFenceRefusesCallsWhileClosed(t *testing.T) {
	fake, c, reg := setup(t, fakecloud.Options{}, Options{})
	f := &stubFence{}
	f.set(time.Now().Add(time.Hour), true)
	lbs := mustLBs(t, c.ForFenced("service-lb-controller", f))
	routes, _ := c.ForFenced("node-route-controller", f).Routes()

	_, err := lbs.EnsureLoadBalancer(context.Background(), lbSpec("web"), nil)
	if !errors.Is(err, cloud.ErrFenced) {
		t.Fatalf("EnsureLoadBalancer through a closed fence: %v, want cloud.ErrFenced", err)
	}
	if cloud.IsNotFound(err) || cloud.IsThrottled(err) {
		t.Errorf("a fenced error reads as a cloud answer: %v", err)
	}
	if err := routes.DeleteRoute(context.Background(), "c1", cloud.Route{Name: "r"}); !errors.Is(err, cloud.ErrFenced) {
		t.Fatalf("DeleteRoute through a closed fence: %v, want cloud.ErrFenced", err)
	}
	if n := fake.TotalCalls(); n != 0 {
		t.Errorf("the cloud saw %d calls through a closed fence, want 0", n)
	}
	if got := metrictest.Value(t, reg, "nephele_cloud_fenced_total", map[string]string{"controller": "service-lb-controller", "operation": string(cloud.OpEnsureLoadBalancer)}); got != 1 {
		t.Errorf("fenced calls counted = %v, want 1", got)
	}
	if got := requests(t, reg, "service-lb-controller", cloud.OpEnsureLoadBalancer, cloud.ResultError); got != 0 {
		t.Errorf("a fenced call was counted as a request: %v", got)
	}

	// Open again (a renewal): calls go through.
	f.set(time.Now().Add(time.Hour), false)
	if _, err := lbs.EnsureLoadBalancer(context.Background(), lbSpec("web"), nil); err != nil {
		t.Fatalf("EnsureLoadBalancer through an open fence: %v", err)
	}
	if n := fake.Calls(cloud.OpEnsureLoadBalancer); n != 1 {
		t.Errorf("the cloud saw %d ensures, want 1", n)
	}
}

func TestUnfencedProviderIgnoresFences(t *testing.T) {
	fake, c, _ := setup(t, fakecloud.Options{}, Options{})
	routes, _ := c.ForFenced("node-route-controller", nil).Routes()
	if _, err := routes.ListRoutes(context.Background(), "c1"); err != nil {
		t.Fatalf("ListRoutes without a fence: %v", err)
	}
	if fake.Calls(cloud.OpListRoutes) != 1 {
		t.Error("the call did not reach the cloud")
	}
}

func TestFenceCheckedAfterTheWaits(t *testing.T) {
	// The fence closes while the call waits for the client-side rate limit: the call
	// must not go out when its token comes.
	fake, c, _ := setup(t, fakecloud.Options{}, Options{QPS: 5, Burst: 1})
	f := &stubFence{}
	f.set(time.Now().Add(time.Hour), false)
	routes, _ := c.ForFenced("node-route-controller", f).Routes()
	if _, err := routes.ListRoutes(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	// The next token comes in 200ms; close the fence meanwhile.
	time.AfterFunc(50*time.Millisecond, func() { f.set(time.Time{}, true) })
	_, err := routes.ListRoutes(context.Background(), "c1")
	if !errors.Is(err, cloud.ErrFenced) {
		t.Fatalf("ListRoutes after the fence closed during the wait: %v, want cloud.ErrFenced", err)
	}
	if n := fake.Calls(cloud.OpListRoutes); n != 1 {
		t.Errorf("the cloud saw %d calls, want only the first", n)
	}
}

func TestFenceCutsOffACallWhenItCloses(t *testing.T) {
	fake, c, reg := setup(t, fakecloud.Options{}, Options{Timeout: time.Minute})
	fake.Hang(cloud.OpEnsureLoadBalancerDeleted, "")
	f := &stubFence{}
	closesAt := time.Now().Add(100 * time.Millisecond)
	f.set(closesAt, false)
	lbs := mustLBs(t, c.ForFenced("service-lb-controller", f))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := time.AfterFunc(30*time.Second, cancel) // a broken fence fails, not hangs, the test
	defer stop.Stop()
	err := lbs.EnsureLoadBalancerDeleted(ctx, lbSpec("web"), nil)
	if !errors.Is(err, cloud.ErrFenced) {
		t.Fatalf("a call under way when the fence closed: %v, want cloud.ErrFenced", err)
	}
	if late := time.Since(closesAt); late > 5*time.Second {
		t.Errorf("the call ended %s after the fence closed", late)
	}
	// It did reach the cloud, so it counts as a request, ended by its deadline.
	if got := requests(t, reg, "service-lb-controller", cloud.OpEnsureLoadBalancerDeleted, cloud.ResultTimeout); got != 1 {
		t.Errorf("cut-off calls counted as timeouts = %v, want 1", got)
	}
}

func TestFenceDoesNotHideTheCallersOwnCancel(t *testing.T) {
	fake, c, _ := setup(t, fakecloud.Options{}, Options{})
	fake.Hang(cloud.OpGetLoadBalancer, "")
	f := &stubFence{}
	f.set(time.Now().Add(time.Hour), false)
	lbs := mustLBs(t, c.ForFenced("service-lb-controller", f))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := lbs.GetLoadBalancer(ctx, lbSpec("web"), nil)
	if errors.Is(err, cloud.ErrFenced) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetLoadBalancer past the caller's deadline: %v, want DeadlineExceeded, not fenced", err)
	}
}
