package cloudtap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/nephele-dev/nephele/localcloud/api"
)

// maxBody bounds the request and answer bodies the tap reads; the local cloud's own
// limit is 8 MiB.
const maxBody = 16 << 20

// LoadBalancer is what the tap saw of one load balancer.
type LoadBalancer struct {
	// Name is the load balancer's name in the cloud.
	Name string
	// Service is the "namespace/name" of its Service, from the last ensure.
	Service string
	// Ensures and Updates count the ensure and backend-update requests issued,
	// whatever their answer.
	Ensures, Updates int
	// Backends maps node name to address, as the cloud last confirmed them; only the
	// watched nodes when Watch was called.
	Backends map[string]string
	// Changed is when the confirmed backends (all of them, watched or not) last
	// changed.
	Changed time.Time
	// Unchanged counts the backend updates the cloud confirmed that left the confirmed
	// backend set as it was: calls a controller need not have made.
	Unchanged int
	// hash identifies the whole confirmed backend set.
	hash uint64
	// Held counts requests the tap held because the load balancer's Service was
	// marked to hang.
	Held int
}

// Tap is a running proxy. Create it with Start and stop it with Close.
type Tap struct {
	target *url.URL
	proxy  *httputil.ReverseProxy
	ln     net.Listener
	srv    *http.Server
	done   chan struct{}

	mu       sync.Mutex
	lbs      map[string]*LoadBalancer
	routes   map[string]time.Time // destination CIDR -> when a create was first confirmed
	watch    map[string]bool      // nodes whose backends are kept; nil keeps all
	hang     map[string]bool      // Service keys whose load balancer calls are held
	released chan struct{}        // closed by Release; replaced by Hang
	seed     maphash.Seed         // of the backend set hashes
}

// Start proxies a loopback port to the local cloud at target ("http://host:port").
func Start(target string) (*Tap, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("cloud tap: target %q: want http://host:port", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cloud tap: %w", err)
	}
	t := &Tap{
		target:   u,
		ln:       ln,
		done:     make(chan struct{}),
		lbs:      map[string]*LoadBalancer{},
		routes:   map[string]time.Time{},
		hang:     map[string]bool{},
		released: make(chan struct{}),
		seed:     maphash.MakeSeed(),
	}
	t.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host
		},
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second},
		// A client that gave up (its timeout) is not an error worth a log line.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				http.Error(w, "cloud tap: "+err.Error(), http.StatusBadGateway)
			}
		},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/loadbalancers/{name}", t.serveLB(opEnsure))
	mux.HandleFunc("PUT /v1/loadbalancers/{name}/backends", t.serveLB(opUpdate))
	mux.HandleFunc("GET /v1/loadbalancers/{name}", t.serveLB(opOther))
	mux.HandleFunc("DELETE /v1/loadbalancers/{name}", t.serveLB(opOther))
	mux.HandleFunc("POST /v1/clusters/{cluster}/routes", t.serveRouteCreate)
	mux.HandleFunc("POST /v1/clusters/{cluster}/routechanges", t.serveRouteApply)
	mux.Handle("/", t.proxy)
	t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(t.done)
		_ = t.srv.Serve(ln)
	}()
	return t, nil
}

// URL is the tap's base URL, to give the controllers as the cloud's endpoint.
func (t *Tap) URL() string { return "http://" + t.ln.Addr().String() }

// Close stops the tap, ending held requests.
func (t *Tap) Close() error {
	t.Release()
	err := t.srv.Close()
	<-t.done
	return err
}

// Hang makes every request for the load balancer of Service key ("namespace/name")
// wait until the client gives up or Release is called.
func (t *Tap) Hang(serviceKey string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hang[serviceKey] = true
	select {
	case <-t.released:
		t.released = make(chan struct{})
	default:
	}
}

// Watch keeps only the given nodes in LoadBalancer.Backends from now on (Changed still
// follows every backend). With a thousand load balancers of thousands of backends each,
// keeping them all would cost the tap's process, which shares the machine with the
// controllers under test, hundreds of megabytes of heap to scan.
func (t *Tap) Watch(nodes []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watch = make(map[string]bool, len(nodes))
	for _, n := range nodes {
		t.watch[n] = true
	}
}

// Release lets every held request through and holds no more.
func (t *Tap) Release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.hang)
	select {
	case <-t.released:
	default:
		close(t.released)
	}
}

// Counts are a load balancer's request counters.
type Counts struct {
	Ensures, Updates, Held, Unchanged int
}

// Counts returns every load balancer's counters, by name, without copying backends.
func (t *Tap) Counts() map[string]Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]Counts, len(t.lbs))
	for name, lb := range t.lbs {
		out[name] = Counts{Ensures: lb.Ensures, Updates: lb.Updates, Held: lb.Held, Unchanged: lb.Unchanged}
	}
	return out
}

// Issued returns how many ensure and backend-update requests were issued, over every
// load balancer, whatever their answer: what a scenario polls to see that calls stopped,
// without copying every load balancer's counters.
func (t *Tap) Issued() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, lb := range t.lbs {
		n += lb.Ensures + lb.Updates
	}
	return n
}

// HasBackends reports whether the cloud confirmed every node of want, at its address,
// in load balancer name's backends, and when those backends last changed. It copies
// nothing, so it is cheap to poll for many load balancers with many backends.
func (t *Tap) HasBackends(name string, want map[string]string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	lb, ok := t.lbs[name]
	if !ok {
		return time.Time{}, false
	}
	for n, addr := range want {
		if got, ok := lb.Backends[n]; !ok || got != addr {
			return time.Time{}, false
		}
	}
	return lb.Changed, true
}

// LoadBalancers returns a copy of what the tap saw, by load balancer name.
func (t *Tap) LoadBalancers() map[string]LoadBalancer {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]LoadBalancer, len(t.lbs))
	for name, lb := range t.lbs {
		c := *lb
		c.Backends = maps.Clone(lb.Backends)
		out[name] = c
	}
	return out
}

// Routes returns, per destination CIDR, when the cloud first confirmed a route create
// for it (a route deleted later stays listed).
func (t *Tap) Routes() map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.routes)
}

func (t *Tap) serveRouteCreate(w http.ResponseWriter, r *http.Request) {
	var route api.Route
	if t.proxyAndDecode(w, r, &route) {
		t.routesConfirmed(route)
	}
}

// serveRouteApply records the routes a routes.apply call created (or found), as
// serveRouteCreate does for one.
func (t *Tap) serveRouteApply(w http.ResponseWriter, r *http.Request) {
	var list api.RouteList
	if t.proxyAndDecode(w, r, &list) {
		t.routesConfirmed(list.Items...)
	}
}

// proxyAndDecode passes r to the cloud and its answer back, and decodes a successful
// answer into out; false when the cloud refused r or the answer is not out's JSON.
func (t *Tap) proxyAndDecode(w http.ResponseWriter, r *http.Request, out any) bool {
	rec := &recorder{ResponseWriter: w}
	t.proxy.ServeHTTP(rec, r)
	if rec.status < 200 || rec.status >= 300 {
		return false
	}
	return json.Unmarshal(rec.body.Bytes(), out) == nil
}

// routesConfirmed records now as the time the cloud confirmed each route's creation,
// unless an earlier one did.
func (t *Tap) routesConfirmed(routes ...api.Route) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, route := range routes {
		if _, seen := t.routes[route.DestinationCIDR]; !seen && route.DestinationCIDR != "" {
			t.routes[route.DestinationCIDR] = now
		}
	}
}

type op int

const (
	opOther op = iota
	opEnsure
	opUpdate
)

func (t *Tap) serveLB(o op) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		var body []byte
		if r.Body != nil {
			b, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
			if err != nil {
				http.Error(w, "cloud tap: reading the request: "+err.Error(), http.StatusBadRequest)
				return
			}
			body = b
			r.Body = io.NopCloser(bytes.NewReader(b))
			r.ContentLength = int64(len(b))
		}
		service := ""
		if o == opEnsure {
			var spec struct {
				Service string `json:"service"`
			}
			if json.Unmarshal(body, &spec) == nil {
				service = spec.Service
			}
		}
		release, held := t.issued(name, service, o)
		if held {
			select {
			case <-r.Context().Done():
				// The client gave up: to it the cloud never answered.
				return
			case <-release:
			}
		}
		if o == opOther {
			t.proxy.ServeHTTP(w, r)
			return
		}
		// The answer only says whether the cloud took the request; the backends it
		// took are the request's, which is already read (the answer, a whole load
		// balancer, need not be kept and decoded too).
		rec := &recorder{ResponseWriter: w, discard: true}
		t.proxy.ServeHTTP(rec, r)
		if rec.status < 200 || rec.status >= 300 {
			return
		}
		var backends []api.Backend
		switch o {
		case opEnsure:
			var spec api.LoadBalancerSpec
			if json.Unmarshal(body, &spec) != nil {
				return
			}
			backends = spec.Backends
		case opUpdate:
			var upd api.BackendsUpdate
			if json.Unmarshal(body, &upd) != nil {
				return
			}
			backends = upd.Backends
		}
		t.confirmed(name, backends, o == opUpdate)
	}
}

// issued counts a request and says whether to hold it, with the channel that frees it.
func (t *Tap) issued(name, service string, o op) (<-chan struct{}, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	lb := t.lb(name)
	if service != "" {
		lb.Service = service
	}
	switch o {
	case opEnsure:
		lb.Ensures++
	case opUpdate:
		lb.Updates++
	}
	if lb.Service != "" && t.hang[lb.Service] {
		lb.Held++
		return t.released, true
	}
	return nil, false
}

// confirmed records the backends the cloud answered with; update is set for a backend
// update, which is counted as Unchanged when the set stays the same.
func (t *Tap) confirmed(name string, backends []api.Backend, update bool) {
	now := time.Now()
	// The set's hash is the sum of its members' hashes, so order does not matter. A
	// fan-out confirms thousands of backends for each of a thousand load balancers while
	// the controllers are measured on the same cores: maphash.Hash hashes them without
	// allocating.
	var hash uint64
	var h maphash.Hash
	h.SetSeed(t.seed)
	for _, b := range backends {
		h.Reset()
		h.WriteString(b.NodeName)
		h.WriteByte(0)
		h.WriteString(b.Address)
		hash += h.Sum64()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	lb := t.lb(name)
	if lb.Changed.IsZero() && len(backends) == 0 || lb.hash == hash && !lb.Changed.IsZero() {
		if update {
			lb.Unchanged++
		}
		return
	}
	kept := make(map[string]string, min(len(backends), max(len(t.watch), 1)))
	for _, b := range backends {
		if t.watch == nil || t.watch[b.NodeName] {
			kept[b.NodeName] = b.Address
		}
	}
	lb.Backends, lb.hash, lb.Changed = kept, hash, now
}

func (t *Tap) lb(name string) *LoadBalancer {
	lb, ok := t.lbs[name]
	if !ok {
		lb = &LoadBalancer{Name: name}
		t.lbs[name] = lb
	}
	return lb
}

// recorder passes an answer on, noting its status and, unless discard is set, keeping a
// copy of its body.
type recorder struct {
	http.ResponseWriter
	discard bool
	status  int
	body    bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if !r.discard && r.body.Len()+len(b) <= maxBody {
		r.body.Write(b)
	}
	return r.ResponseWriter.Write(b)
}

// Flush keeps streaming answers streaming.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
