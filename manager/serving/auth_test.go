package serving

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// scraper is the identity the tests' valid token belongs to.
var scraper = authenticationv1.UserInfo{
	Username: "system:serviceaccount:monitoring:prometheus",
	UID:      "0f3c6c8e-uid",
	Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"},
	Extra:    map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}},
}

func testRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "nephele_test_scrapes_total", Help: "Test counter."})
	c.Add(3)
	reg.MustRegister(c)
	return reg
}

func TestProtectedEndpoints(t *testing.T) {
	tests := []struct {
		name      string
		profiling bool
		method    string
		path      string
		header    string // Authorization header
		tokenErr  error
		sarErr    error
		wantCode  int
		wantBody  string // substring
	}{
		{name: "metrics without token", path: "/metrics", wantCode: http.StatusUnauthorized, wantBody: "Unauthorized"},
		{name: "metrics with basic auth", path: "/metrics", header: "Basic YTpi", wantCode: http.StatusUnauthorized},
		{name: "metrics with empty bearer", path: "/metrics", header: "Bearer ", wantCode: http.StatusUnauthorized},
		{name: "metrics with unknown token", path: "/metrics", header: "Bearer wrong", wantCode: http.StatusUnauthorized},
		{name: "metrics with denied user", path: "/metrics", header: "Bearer reader", wantCode: http.StatusForbidden,
			wantBody: `Forbidden: user "reader" cannot get path "/metrics": no RBAC policy matched`},
		{name: "metrics allowed", path: "/metrics", header: "Bearer scrape", wantCode: http.StatusOK,
			wantBody: "nephele_test_scrapes_total 3"},
		{name: "bearer scheme is case-insensitive", path: "/metrics", header: "bearer scrape", wantCode: http.StatusOK},
		{name: "verb is the lower-case method", method: http.MethodPost, path: "/metrics", header: "Bearer scrape",
			wantCode: http.StatusForbidden, wantBody: `cannot post path "/metrics"`},
		{name: "token review fails", path: "/metrics", header: "Bearer scrape", tokenErr: errors.New("apiserver down"),
			wantCode: http.StatusUnauthorized},
		{name: "access review fails", path: "/metrics", header: "Bearer scrape", sarErr: errors.New("apiserver down"),
			wantCode: http.StatusInternalServerError},
		{name: "pprof without token", profiling: true, path: "/debug/pprof/", wantCode: http.StatusUnauthorized},
		{name: "pprof with denied path", profiling: true, path: "/debug/pprof/heap", header: "Bearer scrape",
			wantCode: http.StatusForbidden, wantBody: `cannot get path "/debug/pprof/heap"`},
		{name: "pprof allowed", profiling: true, path: "/debug/pprof/", header: "Bearer profiler", wantCode: http.StatusOK,
			wantBody: "goroutine"},
		{name: "pprof profile allowed", profiling: true, path: "/debug/pprof/goroutine?debug=1", header: "Bearer profiler",
			wantCode: http.StatusOK, wantBody: "goroutine profile"},
		{name: "pprof disabled", path: "/debug/pprof/", header: "Bearer profiler", wantCode: http.StatusNotFound},
		{name: "pprof disabled still needs a token", path: "/debug/pprof/", wantCode: http.StatusUnauthorized},
		{name: "unknown path needs a token", path: "/nope", wantCode: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI()
			api.addUser("scrape", scraper, "get", "/metrics")
			api.addUser("reader", authenticationv1.UserInfo{Username: "reader"}, "get", "/other")
			api.addUser("profiler", authenticationv1.UserInfo{Username: "profiler"}, "get",
				"/debug/pprof/", "/debug/pprof/goroutine")
			api.setErrors(tt.tokenErr, tt.sarErr)
			cfg := testConfig(api)
			cfg.Gatherer = testRegistry(t)
			cfg.EnableProfiling = tt.profiling
			r := start(t, mustNew(t, cfg))

			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			req, err := http.NewRequest(method, r.base+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			resp, err := r.client.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, tt.path, err)
			}
			body := readBody(t, resp)
			if resp.StatusCode != tt.wantCode || !strings.Contains(body, tt.wantBody) {
				t.Errorf("%s %s = %d, body:\n%s\nwant %d with %q", method, tt.path, resp.StatusCode, body, tt.wantCode, tt.wantBody)
			}
			if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without a WWW-Authenticate header")
			}
		})
	}
}

// TestReviewShapes checks that the reviews are what a real kube-apiserver accepts: the
// token in TokenReview spec.token, and a SubjectAccessReview about the authenticated
// user with non-resource attributes only.
func TestReviewShapes(t *testing.T) {
	api := newFakeAPI()
	api.addUser("scrape", scraper, "get", "/metrics")
	cfg := testConfig(api)
	cfg.Gatherer = testRegistry(t)
	r := start(t, mustNew(t, cfg))
	if code, body := r.get(t, "/metrics", "scrape"); code != http.StatusOK {
		t.Fatalf("GET /metrics = %d: %s", code, body)
	}

	trs, sars := api.lastReviews()
	if len(trs) != 1 || len(sars) != 1 {
		t.Fatalf("got %d TokenReviews and %d SubjectAccessReviews, want 1 each", len(trs), len(sars))
	}
	wantTR := authenticationv1.TokenReviewSpec{Token: "scrape"}
	if !reflect.DeepEqual(trs[0].Spec, wantTR) || trs[0].Name != "" || trs[0].Namespace != "" {
		t.Errorf("TokenReview = %+v, want spec %+v and no name or namespace", trs[0], wantTR)
	}
	wantSAR := authorizationv1.SubjectAccessReviewSpec{
		User:                  scraper.Username,
		UID:                   scraper.UID,
		Groups:                scraper.Groups,
		Extra:                 map[string]authorizationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}
	if !reflect.DeepEqual(sars[0].Spec, wantSAR) || sars[0].Name != "" || sars[0].Namespace != "" {
		t.Errorf("SubjectAccessReview = %+v\nwant spec %+v and no name or namespace", sars[0], wantSAR)
	}
}

func TestAlwaysAllowPaths(t *testing.T) {
	tests := []struct {
		name     string
		allow    []string
		path     string
		wantCode int
	}{
		{name: "exact path", allow: []string{"/metrics"}, path: "/metrics", wantCode: http.StatusOK},
		{name: "exact path is not a prefix", allow: []string{"/debug"}, path: "/debug/pprof/", wantCode: http.StatusUnauthorized},
		{name: "prefix", allow: []string{"/debug/*"}, path: "/debug/pprof/", wantCode: http.StatusOK},
		{name: "other path still protected", allow: []string{"/debug/*"}, path: "/metrics", wantCode: http.StatusUnauthorized},
		{name: "health open with an empty list", allow: []string{}, path: "/readyz", wantCode: http.StatusOK},
		{name: "default", allow: DefaultAlwaysAllowPaths(), path: "/metrics", wantCode: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI()
			cfg := testConfig(api)
			cfg.Gatherer = testRegistry(t)
			cfg.EnableProfiling = true
			cfg.AlwaysAllowPaths = tt.allow
			r := start(t, mustNew(t, cfg))
			if code, body := r.get(t, tt.path, ""); code != tt.wantCode {
				t.Errorf("GET %s without a token = %d, want %d: %s", tt.path, code, tt.wantCode, body)
			}
			if tt.wantCode == http.StatusOK && api.tokenCalls.Load()+api.sarCalls.Load() != 0 {
				t.Errorf("an always-allowed path made review calls")
			}
		})
	}
}

// TestOpenPathsDoNotLeak checks that a path that looks open but names a protected
// endpoint after cleaning does not reach that endpoint without authentication.
func TestOpenPathsDoNotLeak(t *testing.T) {
	api := newFakeAPI()
	cfg := testConfig(api)
	cfg.Gatherer = testRegistry(t)
	r := start(t, mustNew(t, cfg))
	for _, path := range []string{"/healthz/../metrics", "/readyz/%2e%2e/metrics", "/readyz/..%2fmetrics", "/livez//metrics"} {
		req, err := http.NewRequest(http.MethodGet, r.base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Opaque = "//" + req.URL.Host + path // send the path exactly as written
		resp, err := r.client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body := readBody(t, resp)
		t.Logf("GET %s = %d", path, resp.StatusCode)
		if strings.Contains(body, "nephele_test_scrapes_total") {
			t.Errorf("GET %s served metrics without a token (%d)", path, resp.StatusCode)
		}
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			// Following the redirect must meet authentication.
			loc, err := resp.Location()
			if err != nil {
				t.Fatalf("GET %s: redirect without location: %v", path, err)
			}
			if code, _ := r.get(t, loc.Path, ""); code != http.StatusUnauthorized && code != http.StatusNotFound {
				t.Errorf("GET %s redirected to %s which answered %d without a token", path, loc.Path, code)
			}
		}
	}
}

func TestReviewsAreCached(t *testing.T) {
	api := newFakeAPI()
	api.addUser("scrape", scraper, "get", "/metrics")
	api.addUser("reader", authenticationv1.UserInfo{Username: "reader"}, "get", "/other")
	cfg := testConfig(api)
	cfg.Gatherer = testRegistry(t)
	s := mustNew(t, cfg)
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s.auth.now = clock.Now
	r := start(t, s)

	expect := func(step string, token string, wantCode int, wantTR, wantSAR int32) {
		t.Helper()
		if code, body := r.get(t, "/metrics", token); code != wantCode {
			t.Fatalf("%s: GET /metrics = %d, want %d: %s", step, code, wantCode, body)
		}
		if got := api.tokenCalls.Load(); got != wantTR {
			t.Errorf("%s: %d TokenReviews so far, want %d", step, got, wantTR)
		}
		if got := api.sarCalls.Load(); got != wantSAR {
			t.Errorf("%s: %d SubjectAccessReviews so far, want %d", step, got, wantSAR)
		}
	}
	expect("first scrape", "scrape", http.StatusOK, 1, 1)
	expect("second scrape", "scrape", http.StatusOK, 1, 1)
	clock.Step(9 * time.Second)
	expect("scrape within the TTL", "scrape", http.StatusOK, 1, 1)
	clock.Step(2 * time.Second)
	expect("scrape after the TTL", "scrape", http.StatusOK, 2, 2)

	expect("denied", "reader", http.StatusForbidden, 3, 3)
	expect("denied again at once", "reader", http.StatusForbidden, 3, 3)
	clock.Step(1500 * time.Millisecond)
	// The token is still trusted (10s); the denial has expired (1s).
	expect("denied after the denial TTL", "reader", http.StatusForbidden, 3, 4)

	expect("unknown token", "wrong", http.StatusUnauthorized, 4, 4)
	expect("unknown token again at once", "wrong", http.StatusUnauthorized, 4, 4)
	clock.Step(1500 * time.Millisecond)
	expect("unknown token after its TTL", "wrong", http.StatusUnauthorized, 5, 4)

	api.setErrors(errors.New("apiserver down"), nil)
	expect("review error", "fresh", http.StatusUnauthorized, 6, 4)
	api.setErrors(nil, nil)
	api.addUser("fresh", authenticationv1.UserInfo{Username: "fresh"}, "get", "/metrics")
	expect("review errors are not cached", "fresh", http.StatusOK, 7, 5)
}

func TestReviewCachesAreBounded(t *testing.T) {
	api := newFakeAPI()
	s := mustNew(t, testConfig(api))
	t.Cleanup(func() { _ = s.Close() })
	for i := range authCacheSize + 50 {
		token := fmt.Sprintf("token-%d", i)
		user := authenticationv1.UserInfo{Username: token}
		api.addUser(token, user, "get", "/metrics")
		if _, ok, err := s.auth.authenticate(t.Context(), token); err != nil || !ok {
			t.Fatalf("authenticate %s = %v, %v", token, ok, err)
		}
		if d, err := s.auth.authorize(t.Context(), user, "/metrics", "get"); err != nil || !d.allowed {
			t.Fatalf("authorize %s = %+v, %v", token, d, err)
		}
	}
	if n := s.auth.tokens.len(); n != authCacheSize {
		t.Errorf("token cache holds %d entries, want the bound %d", n, authCacheSize)
	}
	if n := s.auth.decisions.len(); n != authCacheSize {
		t.Errorf("decision cache holds %d entries, want the bound %d", n, authCacheSize)
	}
	// The most recent token is still cached; the first was evicted.
	before := api.tokenCalls.Load()
	if _, _, err := s.auth.authenticate(t.Context(), fmt.Sprintf("token-%d", authCacheSize+49)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.auth.authenticate(t.Context(), "token-0"); err != nil {
		t.Fatal(err)
	}
	if got := api.tokenCalls.Load() - before; got != 1 {
		t.Errorf("re-authenticating the newest and the oldest token made %d TokenReviews, want 1 (the evicted oldest)", got)
	}
}

func TestConfigValidatesAlwaysAllowPaths(t *testing.T) {
	for _, paths := range [][]string{{"metrics"}, {"/a*b"}, {"/ok", ""}} {
		cfg := testConfig(newFakeAPI())
		cfg.AlwaysAllowPaths = paths
		s, err := New(cfg)
		if err == nil {
			_ = s.Close()
			t.Errorf("New with AlwaysAllowPaths %q succeeded, want an error", paths)
			continue
		}
		if !strings.Contains(err.Error(), "--authorization-always-allow-paths") {
			t.Errorf("New with AlwaysAllowPaths %q: error %q does not name the flag", paths, err)
		}
	}
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading response body: %v", err)
	}
	return string(body)
}
