package witness

import (
	"io"
	"log"
	"net"
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

	"github.com/nephele-dev/nephele/internal/testkit/servertest"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/dataplane"
	"github.com/nephele-dev/nephele/localcloud/server"
	"github.com/nephele-dev/nephele/providers/local"
)

// Load balancer operations as the Witness names them, from the local cloud's API.
const (
	OpEnsure = "ensure" // PUT /v1/loadbalancers/{name}
	OpUpdate = "update" // PUT /v1/loadbalancers/{name}/backends
	OpDelete = "delete" // DELETE /v1/loadbalancers/{name}
	OpGet    = "get"    // GET /v1/loadbalancers/{name}
	OpOther  = "other"  // instances, listings, routes
)

// Call is one request that reached the witness.
type Call struct {
	// Replica is the name the caller's proxy was made for (CloudConfig).
	Replica string
	// Op is one of the Op constants; LB the load balancer's name, if any.
	Op string
	LB string
	// Arrived is when the request reached the witness, Answered when the cloud's
	// answer went back (zero if it never did).
	Arrived, Answered time.Time
	// Status is the HTTP status of the answer.
	Status int
}

// Interceptor decides the fate of a request before the cloud sees it; it may block, to
// kill the caller meanwhile.
type Interceptor func(c Call) Action

// Action is what to do with one request. The zero Action forwards it.
type Action struct {
	// Drop answers 503 without the cloud seeing the request.
	Drop bool
	// BeforeRelay runs once the cloud has answered, before the answer goes back;
	// AfterRelay once it has gone back.
	BeforeRelay, AfterRelay func()
}

// Witness is the local cloud as the scenarios see it: one cloud, and in front of it one
// recording proxy per replica, so that the cloud's side of the wire says who called
// what and when.
type Witness struct {
	cloudURL *url.URL
	caPEM    []byte // verifies an https cloud; nil for http
	// Client talks to the cloud directly, past every proxy.
	Client *client.Client
	token  string

	mu        sync.Mutex
	calls     []Call
	intercept Interceptor
}

// New starts a local cloud for the test, with load balancer VIPs on a loopback
// range and no health checks (the scenarios' nodes run nothing), and returns its witness
// with no proxy yet. The cloud stops when the test ends.
func New(t testing.TB) *Witness {
	t.Helper()
	srv, c := servertest.Start(t, server.Config{
		VIPPool:   testnet.LoopbackPrefix(114),
		DataPlane: dataplane.Config{DisableHealthChecks: true},
	})
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	return &Witness{cloudURL: u, Client: c, token: servertest.Token}
}

// Of returns a witness of a cloud running elsewhere (a cluster's), at cloudURL
// with token, verified against caPEM when the cloud is https (nil for http).
func Of(t testing.TB, cloudURL, token string, caPEM []byte) *Witness {
	t.Helper()
	u, err := url.Parse(cloudURL)
	if err != nil {
		t.Fatalf("the cloud's URL %q: %v", cloudURL, err)
	}
	c, err := client.New(cloudURL, token, client.WithCA(caPEM))
	if err != nil {
		t.Fatalf("a client for the cloud at %s: %v", cloudURL, err)
	}
	return &Witness{cloudURL: u, Client: c, token: token, caPEM: caPEM}
}

// SetIntercept sets (nil: clears) the Interceptor of every replica's requests.
func (w *Witness) SetIntercept(i Interceptor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.intercept = i
}

// CloudConfig starts replica's proxy and returns a local provider cloud config pointing
// at it.
func (w *Witness) CloudConfig(t testing.TB, replica string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), replica+"-cloud.yaml")
	url := w.Front(t, "127.0.0.1:0", func(*http.Request) string { return replica })
	data, err := local.File{Endpoint: url, Token: w.token}.Marshal("the handover scenarios' witness")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Front starts a recording proxy to the cloud on listen ("host:port") until the test
// ends and returns its URL; caller names the caller of each request (Call.Replica).
func (w *Witness) Front(t testing.TB, listen string, caller func(*http.Request) string) string {
	t.Helper()
	proxy := httputil.NewSingleHostReverseProxy(w.cloudURL)
	if w.caPEM != nil {
		cfg, err := client.TLSConfig(w.caPEM)
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{TLSClientConfig: cfg}
		t.Cleanup(tr.CloseIdleConnections)
		proxy.Transport = tr
	}
	// A caller killed mid-call is what the scenarios do; the proxy need not say so.
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatalf("listening on %s for the witness: %v", listen, err)
	}
	front := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		c := Call{Replica: caller(r), Arrived: time.Now()}
		c.Op, c.LB = classify(r)
		w.mu.Lock()
		intercept := w.intercept
		w.mu.Unlock()
		var a Action
		if intercept != nil {
			a = intercept(c)
		}
		if a.Drop {
			w.record(c)
			http.Error(rw, "dropped by the scenario", http.StatusServiceUnavailable)
			return
		}
		rec := &statusWriter{ResponseWriter: rw, status: http.StatusOK, before: a.BeforeRelay}
		proxy.ServeHTTP(rec, r)
		c.Answered, c.Status = time.Now(), rec.status
		w.record(c)
		if a.AfterRelay != nil {
			a.AfterRelay()
		}
	})}}
	front.Start()
	t.Cleanup(front.Close)
	return front.URL
}

func (w *Witness) record(c Call) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, c)
}

// Log returns the calls so far, in the order they were recorded.
func (w *Witness) Log() []Call {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Call(nil), w.calls...)
}

// classify names a request's operation and load balancer.
func classify(r *http.Request) (op, lb string) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/loadbalancers/")
	if !ok || rest == "" {
		return OpOther, ""
	}
	name, sub, _ := strings.Cut(rest, "/")
	switch {
	case r.Method == http.MethodPut && sub == "backends":
		return OpUpdate, name
	case r.Method == http.MethodPut && sub == "":
		return OpEnsure, name
	case r.Method == http.MethodDelete:
		return OpDelete, name
	case r.Method == http.MethodGet:
		return OpGet, name
	}
	return OpOther, name
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
