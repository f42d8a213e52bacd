package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	env := map[string]string{"POD_NAME": "web-1", "POD_NAMESPACE": "demo", "POD_IP": "10.244.1.5", "NODE_NAME": "node-a"}
	srv := httptest.NewServer(handler(func(k string) string { return env[k] }))
	defer srv.Close()

	tests := []struct {
		path   string
		status int
		check  func(t *testing.T, body string)
	}{
		{"/healthz", http.StatusOK, func(t *testing.T, body string) {
			if strings.TrimSpace(body) != "ok" {
				t.Errorf("body = %q, want ok", body)
			}
		}},
		{"/", http.StatusOK, func(t *testing.T, body string) {
			var a Answer
			if err := json.Unmarshal([]byte(body), &a); err != nil {
				t.Fatalf("decode %q: %v", body, err)
			}
			if a.Pod != "web-1" || a.Node != "node-a" || a.Namespace != "demo" || a.PodIP != "10.244.1.5" || a.Client == "" {
				t.Errorf("answer = %+v", a)
			}
		}},
		{"/nothing", http.StatusNotFound, func(*testing.T, string) {}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			tt.check(t, string(b))
		})
	}
}
