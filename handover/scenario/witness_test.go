package scenario

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testnet"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/dataplane"
	"github.com/nephele-dev/nephele/localcloud/server"
	"github.com/nephele-dev/nephele/localcloud/servertest"
)

// Load balancer operations as the witness names them, from the local cloud's API.
const (
	opEnsure = "ensure" // PUT /v1/loadbalancers/{name}
	opUpdate = "update" // PUT /v1/loadbalancers/{name}/backends
	opDelete = "delete" // DELETE /v1/loadbalancers/{name}
	opGet    = "get"    // GET /v1/loadbalancers/{name}
	opOther  = "other"  // instances, listings, routes
)

// call is one request that reached the witness.
type call struct {
	replica string
	op      string
	lb      string
	// arrived is when the request reached the witness, answered when the cloud's
	// answer went back (zero if it never did).
	arrived, answered time.Time
	status            int
}

// interceptor decides the fate of a request before the cloud sees it; it may block, to
// kill the caller meanwhile.
type interceptor func(c call) action

// action is what to do with one request. The zero action forwards it.
type action struct {
	// drop answers 503 without the cloud seeing the request.
	drop bool
	// beforeRelay runs once the cloud has answered, before the answer goes back;
	// afterRelay once it has gone back.
	beforeRelay, afterRelay func()
}

// witness is the local cloud as the scenarios see it: one cloud, and in front of it one
// recording proxy per replica, so that the cloud's side of the wire says who called
// what and when.
type witness struct {
	cloudURL *url.URL
	client   *client.Client

	mu        sync.Mutex
	calls     []call
	intercept interceptor
}

func newWitness(t *testing.T) *witness {
	t.Helper()
	srv, c := servertest.Start(t, server.Config{
		VIPPool:   testnet.LoopbackPrefix(114),
		DataPlane: dataplane.Config{DisableHealthChecks: true},
	})
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	return &witness{cloudURL: u, client: c}
}

// setIntercept sets (nil: clears) the interceptor of every replica's requests.
func (w *witness) setIntercept(i interceptor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.intercept = i
}

// cloudConfig starts replica's proxy (once per name) and returns a local provider cloud
// config pointing at it.
func (w *witness) cloudConfig(t *testing.T, replica string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), replica+"-cloud.yaml")
	proxy := httputil.NewSingleHostReverseProxy(w.cloudURL)
	// A caller killed mid-call is what the scenarios do; the proxy need not say so.
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	front := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		c := call{replica: replica, arrived: time.Now()}
		c.op, c.lb = classify(r)
		w.mu.Lock()
		intercept := w.intercept
		w.mu.Unlock()
		var a action
		if intercept != nil {
			a = intercept(c)
		}
		if a.drop {
			w.record(c)
			http.Error(rw, "dropped by the scenario", http.StatusServiceUnavailable)
			return
		}
		rec := &statusWriter{ResponseWriter: rw, status: http.StatusOK, before: a.beforeRelay}
		proxy.ServeHTTP(rec, r)
		c.answered, c.status = time.Now(), rec.status
		w.record(c)
		if a.afterRelay != nil {
			a.afterRelay()
		}
	}))
	t.Cleanup(front.Close)
	if err := os.WriteFile(path, fmt.Appendf(nil, "endpoint: %s\ntoken: %s\n", front.URL, servertest.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (w *witness) record(c call) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, c)
}

// log returns the calls so far, in the order they were recorded.
func (w *witness) log() []call {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]call(nil), w.calls...)
}

// classify names a request's operation and load balancer.
func classify(r *http.Request) (op, lb string) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/loadbalancers/")
	if !ok || rest == "" {
		return opOther, ""
	}
	name, sub, _ := strings.Cut(rest, "/")
	switch {
	case r.Method == http.MethodPut && sub == "backends":
		return opUpdate, name
	case r.Method == http.MethodPut && sub == "":
		return opEnsure, name
	case r.Method == http.MethodDelete:
		return opDelete, name
	case r.Method == http.MethodGet:
		return opGet, name
	}
	return opOther, name
}

// statusWriter remembers the status a handler wrote, and runs before (once) just
// before the answer goes out.
type statusWriter struct {
	http.ResponseWriter
	status int
	before func()
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	if s.before != nil {
		s.before()
		s.before = nil
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.before != nil {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(b)
}
