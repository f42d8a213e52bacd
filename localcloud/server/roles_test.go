package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/localcloud/server"
)

// TestTokensHaveTheirRoles tries every endpoint with the CCM's token, the CSI driver's,
// the administrator's and none: the CCM's reads instances and manages load balancers and
// routes, the CSI driver's manages volumes and reads instances, and each is refused (403,
// saying so) everything else, above all making instances, whose boot command runs as
// root on the machine, and faults; the administrator's may do everything. Before the
// split the one token did everything.
func TestTokensHaveTheirRoles(t *testing.T) {
	const ccmToken, csiToken = "ccm-test-token", "csi-test-token"
	c := startCloud(t, func(cfg *server.Config) { cfg.CCMToken, cfg.CSIToken = ccmToken, csiToken })
	lb := `{"ports":[{"protocol":"TCP","port":80,"nodePort":30080}],"backends":[]}`
	tests := []struct {
		method, path, body string
		ccm, csi           bool // the CCM's, the CSI driver's token may
	}{
		{"GET", "/v1/instances", "", true, true},
		{"GET", "/v1/instances/i-000000000001", "", true, true},
		{"GET", "/v1/instances/by-name/node-1", "", true, true},
		{"POST", "/v1/instances", `{"name":"evil","kind":"host","bootCommand":["sh","-c","id"]}`, false, false},
		{"POST", "/v1/instances", `{"name":"record"}`, false, false},
		{"POST", "/v1/instances/i-000000000001/stop", "", false, false},
		{"POST", "/v1/instances/i-000000000001/start", "", false, false},
		{"POST", "/v1/instances/i-000000000001/terminate", "", false, false},
		{"DELETE", "/v1/instances/i-000000000001", "", false, false},
		{"GET", "/v1/consoles/i-000000000001", "", false, false},
		{"GET", "/v1/loadbalancers", "", true, false},
		{"PUT", "/v1/loadbalancers/web", lb, true, false},
		{"GET", "/v1/loadbalancers/web", "", true, false},
		{"PUT", "/v1/loadbalancers/web/backends", `{"backends":[]}`, true, false},
		{"DELETE", "/v1/loadbalancers/web", "", true, false},
		{"GET", "/v1/clusters/k/routes", "", true, false},
		{"POST", "/v1/clusters/k/routes", `{"destinationCIDR":"10.244.1.0/24","targetInstance":"i-000000000001"}`, true, false},
		{"DELETE", "/v1/clusters/k/routes/r1", "", true, false},
		{"GET", "/admin/faults", "", false, false},
		{"PUT", "/admin/faults", `[]`, false, false},
		{"PUT", "/admin/faults/lb.ensure", `{"operation":"lb.ensure","outage":true}`, false, false},
		{"DELETE", "/admin/faults", "", false, false},
		{"GET", "/metrics", "", false, false},
		{"POST", "/v1/volumes", `{"name":"v","sizeBytes":1048576}`, false, true},
		{"GET", "/v1/volumes", "", false, true},
		{"GET", "/v1/volumes/vol-000000000001", "", false, true},
		{"POST", "/v1/volumes/vol-000000000001/attach", `{"instanceID":"i-000000000001"}`, false, true},
		{"POST", "/v1/volumes/vol-000000000001/detach", `{"instanceID":"i-000000000001"}`, false, true},
		{"POST", "/v1/volumes/vol-000000000001/expand", `{"sizeBytes":2097152}`, false, true},
		{"DELETE", "/v1/volumes/vol-000000000001", "", false, true},
	}
	do := func(method, path, body, tok string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, c.srv.URL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return resp.StatusCode, b.String()
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			if code, _ := do(tt.method, tt.path, tt.body, ""); code != http.StatusUnauthorized {
				t.Errorf("without a token: %d, want 401", code)
			}
			code, body := do(tt.method, tt.path, tt.body, ccmToken)
			switch {
			case !tt.ccm && (code != http.StatusForbidden || !strings.Contains(body, "Forbidden")):
				t.Errorf("with the CCM's token: %d %s, want 403 Forbidden", code, body)
			case tt.ccm && (code == http.StatusForbidden || code == http.StatusUnauthorized):
				t.Errorf("with the CCM's token: %d %s, want it allowed", code, body)
			}
			code, body = do(tt.method, tt.path, tt.body, csiToken)
			switch {
			case !tt.csi && (code != http.StatusForbidden || !strings.Contains(body, "Forbidden")):
				t.Errorf("with the CSI driver's token: %d %s, want 403 Forbidden", code, body)
			case tt.csi && (code == http.StatusForbidden || code == http.StatusUnauthorized):
				t.Errorf("with the CSI driver's token: %d %s, want it allowed", code, body)
			}
			if code, body := do(tt.method, tt.path, tt.body, token); code == http.StatusForbidden || code == http.StatusUnauthorized {
				t.Errorf("with the administrator's token: %d %s, want it allowed", code, body)
			}
		})
	}
}

// TestSetCCMTokensRotates: during a rotation both tokens have the CCM's role, after it
// only the new one; a token that is empty or the administrator's is refused and changes
// nothing.
func TestSetCCMTokensRotates(t *testing.T) {
	c := startCloud(t, func(cfg *server.Config) { cfg.CCMToken = "ccm-old" })
	status := func(tok string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, c.srv.URL()+"/v1/loadbalancers", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	want := func(step string, old, new int) {
		t.Helper()
		if got := status("ccm-old"); got != old {
			t.Errorf("%s: the old token gets %d, want %d", step, got, old)
		}
		if got := status("ccm-new"); got != new {
			t.Errorf("%s: the new token gets %d, want %d", step, got, new)
		}
	}
	want("before", http.StatusOK, http.StatusUnauthorized)
	if err := c.srv.SetCCMTokens("ccm-old", "ccm-new"); err != nil {
		t.Fatal(err)
	}
	want("during", http.StatusOK, http.StatusOK)
	for _, bad := range [][]string{{"ccm-new", " "}, {token}} {
		if err := c.srv.SetCCMTokens(bad...); err == nil {
			t.Errorf("SetCCMTokens(%q) accepted", bad)
		}
	}
	want("after refused changes", http.StatusOK, http.StatusOK)
	if err := c.srv.SetCCMTokens("ccm-new"); err != nil {
		t.Fatal(err)
	}
	want("after", http.StatusUnauthorized, http.StatusOK)
}
