package manager_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/servertest"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
	"github.com/nephele-dev/nephele/localcloud/dataplane"
	"github.com/nephele-dev/nephele/localcloud/server"
)

// witness counts the calls that reach the local cloud, per replica: each replica's cloud
// config points at a recording proxy of its own in front of the one cloud, so the
// cloud's side of the wire says who called and when.
type witness struct {
	cloudURL *url.URL
	token    string

	mu    sync.Mutex
	calls map[string][]time.Time // replica -> arrival times
}

func newWitness(t *testing.T) *witness {
	t.Helper()
	srv, _ := servertest.Start(t, server.Config{
		VIPPool:   testnet.LoopbackPrefix(118),
		DataPlane: dataplane.Config{DisableHealthChecks: true},
	})
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	return &witness{cloudURL: u, token: servertest.Token, calls: map[string][]time.Time{}}
}

// cloudConfig starts replica's proxy and returns a local provider cloud config for it.
func (w *witness) cloudConfig(t *testing.T, replica string) string {
	t.Helper()
	proxy := httputil.NewSingleHostReverseProxy(w.cloudURL)
	front := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.calls[replica] = append(w.calls[replica], time.Now())
		w.mu.Unlock()
		proxy.ServeHTTP(rw, r)
	}))
	t.Cleanup(front.Close)
	path := filepath.Join(t.TempDir(), replica+"-cloud.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, "endpoint: %s\ntoken: %s\n", front.URL, w.token), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// callsBetween counts replica's calls that arrived in [from, to).
func (w *witness) callsBetween(replica string, from, to time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, at := range w.calls[replica] {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// TestPausedLeaderMakesNoCloudCalls freezes the leader (SIGSTOP, as a long GC pause or
// a suspended VM would) for longer than its lease, lets the other replica take over,
// resumes it, and counts, at the cloud, the calls the resumed replica makes: there must
// be none. It must then stop (it exits non-zero, to restart as a follower with fresh
// caches, as after any lost lease).
func TestPausedLeaderMakesNoCloudCalls(t *testing.T) {
	e := env(t)
	clearHeartbeats(t, e.Client)
	w := newWitness(t)
	const lease = "fenced-ccm"
	timing := []string{"--leader-elect-resource-name=" + lease, "--leader-elect-lease-duration=6s",
		"--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s", "--cloud-provider=local"}
	a := startCCM(t, e, append(timing, "--cloud-config="+w.cloudConfig(t, "a"))...)
	b := startCCM(t, e, append(timing, "--cloud-config="+w.cloudConfig(t, "b"))...)
	name := map[int]string{a.Pid(): "a", b.Pid(): "b"}

	leader, follower := leaderOf(t, e, a, b)
	poll.Eventually(t, "the leader's cloud calls to reach the cloud", func() error {
		if n := w.callsBetween(name[leader.Pid()], time.Time{}, time.Now()); n < 5 {
			return fmt.Errorf("%d calls so far", n)
		}
		return nil
	})
	oldHolder := leaseHolder(t, e.Client, lease)

	stopped := time.Now()
	if err := leader.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP: %v", err)
	}
	// The follower takes over after the lease expires; keep the leader frozen until it
	// runs every controller and calls the cloud, so that the two would overlap.
	poll.Within(t, 60*time.Second, "the follower to take over from the frozen leader", func() error {
		if h := leaseHolder(t, e.Client, lease); h == oldHolder || h == "" {
			return fmt.Errorf("lease still held by %q", h)
		}
		if err := runsOnly(runners(t, e.Client, time.Second), follower.Pid(), allControllers...); err != nil {
			return err
		}
		if n := w.callsBetween(name[follower.Pid()], stopped, time.Now()); n < 5 {
			return fmt.Errorf("the new leader made %d cloud calls so far", n)
		}
		return nil
	})
	if paused := time.Since(stopped); paused < 6*time.Second {
		t.Fatalf("the follower took over %s after the leader froze, within the 6s lease", paused)
	}
	resumed := time.Now()
	if err := leader.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT: %v", err)
	}
	t.Logf("leader frozen for %s", resumed.Sub(stopped).Round(100*time.Millisecond))

	// The resumed replica notices and exits; it must not have called the cloud.
	select {
	case <-leader.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("the resumed leader is still running 30s after SIGCONT; output:\n%s", leader.Output())
	}
	exited := time.Now()
	if leader.Err() == nil {
		t.Errorf("the resumed leader exited cleanly; want a non-zero exit for its lost lease")
	}
	out := leader.Output()
	if !strings.Contains(out, "leader lease lost") {
		t.Errorf("the resumed leader did not log its lost lease; output:\n%s", out)
	}
	after := w.callsBetween(name[leader.Pid()], resumed, time.Now().Add(time.Hour))
	if after != 0 {
		t.Errorf("the resumed leader made %d cloud calls after SIGCONT, while another replica led; want 0", after)
	}
	if n := w.callsBetween(name[leader.Pid()], stopped.Add(time.Second), resumed); n != 0 {
		t.Errorf("the frozen leader made %d cloud calls while frozen", n)
	}
	t.Logf("the resumed leader exited %s after SIGCONT (%v): %d calls refused by the fence, %d at the cloud",
		exited.Sub(resumed).Round(10*time.Millisecond), leader.Err(), strings.Count(out, "cloud call fenced"), after)

	// The new leader carries on alone.
	poll.Within(t, 30*time.Second, "the new leader to carry on alone", func() error {
		return runsOnly(runners(t, e.Client, time.Second), follower.Pid(), allControllers...)
	})
	l, err := e.Client.CoordinationV1().Leases("kube-system").Get(context.Background(), lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == oldHolder {
		t.Errorf("lease holder after the resume = %v, want the new leader", l.Spec.HolderIdentity)
	}
}
