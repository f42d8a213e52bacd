package serving

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeAPI is a kube-apiserver's review APIs: tokens it knows and the (user, verb, path)
// triples it allows. It counts and records the reviews it answers.
type fakeAPI struct {
	client *fake.Clientset

	mu               sync.Mutex
	tokens           map[string]authenticationv1.UserInfo
	allowed          map[string]bool // user + " " + verb + " " + path
	tokenErr, sarErr error
	tokenReviews     []authenticationv1.TokenReview
	sars             []authorizationv1.SubjectAccessReview

	tokenCalls, sarCalls atomic.Int32
}

func newFakeAPI() *fakeAPI {
	api := &fakeAPI{client: fake.NewClientset(), tokens: map[string]authenticationv1.UserInfo{}, allowed: map[string]bool{}}
	api.client.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		api.tokenCalls.Add(1)
		review := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		api.mu.Lock()
		defer api.mu.Unlock()
		api.tokenReviews = append(api.tokenReviews, *review.DeepCopy())
		if api.tokenErr != nil {
			return true, nil, api.tokenErr
		}
		if user, ok := api.tokens[review.Spec.Token]; ok {
			review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: user}
		} else {
			review.Status = authenticationv1.TokenReviewStatus{Error: "token not known"}
		}
		return true, review, nil
	})
	api.client.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		api.sarCalls.Add(1)
		sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		api.mu.Lock()
		defer api.mu.Unlock()
		api.sars = append(api.sars, *sar.DeepCopy())
		if api.sarErr != nil {
			return true, nil, api.sarErr
		}
		attrs := sar.Spec.NonResourceAttributes
		if attrs != nil && sar.Spec.ResourceAttributes == nil && api.allowed[sar.Spec.User+" "+attrs.Verb+" "+attrs.Path] {
			sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "allowed by test"}
		} else {
			sar.Status = authorizationv1.SubjectAccessReviewStatus{Reason: "no RBAC policy matched"}
		}
		return true, sar, nil
	})
	return api
}

// addUser makes token authenticate as user and allows user the verb on each path.
func (a *fakeAPI) addUser(token string, user authenticationv1.UserInfo, verb string, paths ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokens[token] = user
	for _, p := range paths {
		a.allowed[user.Username+" "+verb+" "+p] = true
	}
}

// allow lets user use verb on path.
func (a *fakeAPI) allow(user, verb, path string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.allowed[user+" "+verb+" "+path] = true
}

func (a *fakeAPI) setErrors(tokenErr, sarErr error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokenErr, a.sarErr = tokenErr, sarErr
}

func (a *fakeAPI) lastReviews() ([]authenticationv1.TokenReview, []authorizationv1.SubjectAccessReview) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]authenticationv1.TokenReview(nil), a.tokenReviews...), append([]authorizationv1.SubjectAccessReview(nil), a.sars...)
}

// fakeClock is a settable clock for the review caches.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// testConfig is a Config for a server on an ephemeral loopback port.
func testConfig(api *fakeAPI) Config {
	return Config{BindAddress: "127.0.0.1", Port: 0, Authn: api.client}
}

func mustNew(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// running is a served Server and a client that trusts its certificate.
type running struct {
	server *Server
	client *http.Client
	base   string
	cancel context.CancelFunc
	// wait returns what Serve returned, waiting for it; it may be called many times.
	wait func() error
}

// start serves s until the test ends and returns a client for it.
func start(t *testing.T, s *Server) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	r := &running{server: s, cancel: cancel, base: "https://" + s.Addr().String()}
	r.wait = sync.OnceValue(func() error { return <-done })
	go func() { done <- s.Serve(ctx) }()
	r.client = &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: serverRoots(t, s)}},
		Timeout:   time.Minute,
		// Redirects are returned, not followed, so tests see them.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	t.Cleanup(func() {
		cancel()
		if err := r.wait(); err != nil {
			t.Errorf("Serve: %v", err)
		}
		r.client.CloseIdleConnections()
	})
	return r
}

// serverRoots is a pool holding the certificate s serves.
func serverRoots(t *testing.T, s *Server) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(s.certs.def().Leaf)
	return pool
}

// do sends method path with an optional bearer token and returns status and body.
func (r *running) do(t *testing.T, method, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, r.base+path, nil)
	if err != nil {
		t.Fatalf("building request %s %s: %v", method, path, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, readBody(t, resp)
}

func (r *running) get(t *testing.T, path, token string) (int, string) {
	t.Helper()
	return r.do(t, http.MethodGet, path, token)
}

// okCheck and failCheck build health checks.
func okCheck(name string) Check {
	return Check{Name: name, Fn: func(*http.Request) error { return nil }}
}

func failCheck(name, reason string) Check {
	return Check{Name: name, Fn: func(*http.Request) error { return errors.New(reason) }}
}

func lines(body string) []string {
	return strings.Split(strings.TrimRight(body, "\n"), "\n")
}

// selfSigned is a self-signed serving certificate as New makes one.
func selfSigned(t *testing.T, bindIP net.IP) *tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := selfSignedPEM(bindIP, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := parseKeyPair([][]byte{certPEM, keyPEM})
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
