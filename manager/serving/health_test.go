package serving

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestHealthEndpointsNeedNoAuth(t *testing.T) {
	api := newFakeAPI()
	s := mustNew(t, testConfig(api))
	r := start(t, s)
	for _, path := range []string{"/healthz", "/livez", "/readyz", "/healthz/ping", "/livez/ping", "/readyz/ping"} {
		code, body := r.get(t, path, "")
		if code != http.StatusOK || body != "ok" {
			t.Errorf("GET %s without a token = %d %q, want 200 \"ok\"", path, code, body)
		}
	}
	if n := api.tokenCalls.Load() + api.sarCalls.Load(); n != 0 {
		t.Errorf("health endpoints made %d review calls, want 0", n)
	}
}

func TestHealthEndpoints(t *testing.T) {
	tests := []struct {
		name      string
		live      []Check
		ready     []Check
		path      string
		wantCode  int
		wantLines []string // whole body when wantBody is empty
		wantBody  string
	}{
		{
			name: "livez ok", live: []Check{okCheck("alive")}, ready: []Check{failCheck("ctrl", "stuck")},
			path: "/livez", wantCode: http.StatusOK, wantBody: "ok",
		},
		{
			name: "livez verbose", live: []Check{okCheck("alive")}, ready: []Check{failCheck("ctrl", "stuck")},
			path: "/livez?verbose", wantCode: http.StatusOK,
			wantLines: []string{"[+]ping ok", "[+]alive ok", "livez check passed"},
		},
		{
			name: "readyz failing lists every check, the reason withheld", live: []Check{okCheck("alive")},
			ready: []Check{okCheck("node"), failCheck("service", "has 3 items waiting")},
			path:  "/readyz", wantCode: http.StatusInternalServerError,
			wantLines: []string{"[+]ping ok", "[+]node ok", "[-]service failed: reason withheld", "readyz check failed"},
		},
		{
			name: "healthz has liveness and readiness checks", live: []Check{okCheck("alive")},
			ready: []Check{okCheck("node"), failCheck("service", "stopped")},
			path:  "/healthz?verbose=1", wantCode: http.StatusInternalServerError,
			wantLines: []string{"[+]ping ok", "[+]alive ok", "[+]node ok", "[-]service failed: reason withheld", "healthz check failed"},
		},
		{
			name: "excluded failing check passes", ready: []Check{okCheck("node"), failCheck("service", "stopped")},
			path: "/readyz?verbose&exclude=service&exclude=nope", wantCode: http.StatusOK,
			wantLines: []string{"[+]ping ok", "[+]node ok", "[+]service excluded: ok",
				`warn: some health checks cannot be excluded: no matches for "nope"`, "readyz check passed"},
		},
		{
			name: "excluded without verbose", ready: []Check{failCheck("service", "stopped")},
			path: "/readyz?exclude=service", wantCode: http.StatusOK, wantBody: "ok",
		},
		{
			name: "single check ok", ready: []Check{okCheck("node"), failCheck("service", "stopped")},
			path: "/readyz/node", wantCode: http.StatusOK, wantBody: "ok",
		},
		{
			name: "single check failing withholds the reason", ready: []Check{failCheck("service", "stopped: cloud unreachable")},
			path: "/readyz/service", wantCode: http.StatusInternalServerError,
			wantBody: "[-]service failed: reason withheld\n",
		},
		{
			name: "single readiness check on healthz", ready: []Check{failCheck("service", "stopped")},
			path: "/healthz/service", wantCode: http.StatusInternalServerError,
			wantBody: "[-]service failed: reason withheld\n",
		},
		{
			name: "readiness check is not on livez", ready: []Check{okCheck("service")},
			path: "/livez/service", wantCode: http.StatusNotFound, wantBody: "404 page not found\n",
		},
		{
			name: "unknown check", path: "/readyz/nope", wantCode: http.StatusNotFound, wantBody: "404 page not found\n",
		},
		{
			name: "empty check name", path: "/readyz/", wantCode: http.StatusNotFound, wantBody: "404 page not found\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustNew(t, testConfig(newFakeAPI()))
			if err := s.AddLivezChecks(tt.live...); err != nil {
				t.Fatalf("AddLivezChecks: %v", err)
			}
			if err := s.AddReadyzChecks(tt.ready...); err != nil {
				t.Fatalf("AddReadyzChecks: %v", err)
			}
			r := start(t, s)
			code, body := r.get(t, tt.path, "")
			if code != tt.wantCode {
				t.Errorf("GET %s = %d, want %d; body:\n%s", tt.path, code, tt.wantCode, body)
			}
			// The paths are open to anyone: a failing check's error (which may name
			// hosts, files or the cloud's answers) goes to the log only, as upstream's.
			for _, c := range append(tt.live, tt.ready...) {
				if err := c.Fn(nil); err != nil && strings.Contains(body, err.Error()) {
					t.Errorf("GET %s tells an unauthenticated caller why %s failed (%q):\n%s", tt.path, c.Name, err, body)
				}
			}
			if tt.wantLines != nil {
				if got := lines(body); !slices.Equal(got, tt.wantLines) {
					t.Errorf("GET %s body lines:\n%q\nwant\n%q", tt.path, got, tt.wantLines)
				}
			} else if body != tt.wantBody {
				t.Errorf("GET %s body = %q, want %q", tt.path, body, tt.wantBody)
			}
		})
	}
}

func TestHealthChecksAddedWhileServing(t *testing.T) {
	s := mustNew(t, testConfig(newFakeAPI()))
	r := start(t, s)
	if code, _ := r.get(t, "/readyz", ""); code != http.StatusOK {
		t.Fatalf("GET /readyz before any check = %d, want 200", code)
	}

	// Add checks while requests are being served, so the race detector sees both.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := r.client.Get(r.base + "/healthz?verbose")
				if err != nil {
					t.Errorf("GET /healthz while adding checks: %v", err)
					return
				}
				resp.Body.Close()
			}
		})
	}
	for i := range 20 {
		if err := s.AddReadyzChecks(okCheck(fmt.Sprintf("controller-%d", i))); err != nil {
			t.Errorf("AddReadyzChecks: %v", err)
		}
	}
	if err := s.AddReadyzChecks(failCheck("leader-election", "lease not renewed")); err != nil {
		t.Fatalf("AddReadyzChecks: %v", err)
	}
	close(stop)
	wg.Wait()

	code, body := r.get(t, "/readyz", "")
	if code != http.StatusInternalServerError || !strings.Contains(body, "[-]leader-election failed: reason withheld\n") ||
		!strings.Contains(body, "[+]controller-19 ok\n") {
		t.Errorf("GET /readyz after adding checks = %d:\n%s", code, body)
	}
	if code, _ := r.get(t, "/livez", ""); code != http.StatusOK {
		t.Errorf("GET /livez = %d, want 200: readiness checks must not affect it", code)
	}
}

func TestAddChecksRejectsBadChecks(t *testing.T) {
	tests := []struct {
		name    string
		checks  []Check
		wantErr string
	}{
		{name: "empty name", checks: []Check{okCheck("")}, wantErr: "empty name"},
		{name: "slash", checks: []Check{okCheck("a/b")}, wantErr: `"a/b": name must not contain "/"`},
		{name: "no function", checks: []Check{{Name: "nil"}}, wantErr: `"nil": no check function`},
		{name: "built-in name", checks: []Check{okCheck("ping")}, wantErr: `"ping": name already registered`},
		{name: "registered name", checks: []Check{okCheck("existing")}, wantErr: `"existing": name already registered`},
		{name: "duplicate in one call", checks: []Check{okCheck("x"), okCheck("x")}, wantErr: `"x": name already registered`},
		{name: "one bad check adds none", checks: []Check{okCheck("good"), okCheck("")}, wantErr: "empty name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustNew(t, testConfig(newFakeAPI()))
			t.Cleanup(func() { _ = s.Close() })
			if err := s.AddLivezChecks(okCheck("existing")); err != nil {
				t.Fatalf("AddLivezChecks: %v", err)
			}
			for name, add := range map[string]func(...Check) error{"livez": s.AddLivezChecks, "readyz": s.AddReadyzChecks, "both": s.AddHealthChecks} {
				err := add(tt.checks...)
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("adding to %s: error %v, want one containing %q", name, err, tt.wantErr)
				}
			}
			if got := len(s.health.snapshot(endpointHealthz)); got != 2 {
				t.Errorf("after failed adds /healthz has %d checks, want 2 (ping, existing)", got)
			}
		})
	}
}

func TestAddHealthChecksServesOnEveryEndpoint(t *testing.T) {
	s := mustNew(t, testConfig(newFakeAPI()))
	if err := s.AddHealthChecks(failCheck("leader-election", "lease lost")); err != nil {
		t.Fatalf("AddHealthChecks: %v", err)
	}
	r := start(t, s)
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		code, body := r.get(t, path, "")
		if code != http.StatusInternalServerError || !strings.Contains(body, "[-]leader-election failed: reason withheld") {
			t.Errorf("GET %s = %d:\n%s", path, code, body)
		}
	}
}
