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

func TestClient(t *testing.T) {
	env := map[string]string{"POD_NAME": "web-2"}
	srv := httptest.NewServer(handler(func(k string) string { return env[k] }))
	defer srv.Close()

	tests := []struct {
		name    string
		args    []string
		want    string // in the output, or in the error
		wantErr bool
	}{
		{name: "answer", args: []string{"get", srv.URL + "/"}, want: `"pod":"web-2"`},
		{name: "not found", args: []string{"get", srv.URL + "/nothing"}, want: "404", wantErr: true},
		{name: "refused", args: []string{"get", "http://127.0.0.1:1/"}, want: "refused", wantErr: true},
		{name: "usage", args: []string{"fetch", srv.URL}, want: "usage", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			err := client(t.Context(), &out, tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("client(%q) error %v, want error %v", tt.args, err, tt.wantErr)
			}
			got := out.String()
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("client(%q) = %q, want it to contain %q", tt.args, got, tt.want)
			}
		})
	}
}
