package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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

// TestCommandLine: no argument serves; `get URL` is the client (exit 0 on a 200, 1
// otherwise); anything else is a usage error, exit 2, naming what was wrong.
func TestCommandLine(t *testing.T) {
	env := map[string]string{"POD_NAME": "web-2"}
	srv := httptest.NewServer(handler(func(k string) string { return env[k] }))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "data")

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{name: "answer", args: []string{"get", srv.URL + "/"}, stdout: `"pod":"web-2"`},
		{name: "not found", args: []string{"get", srv.URL + "/nothing"}, code: 1, stderr: "404"},
		{name: "refused", args: []string{"get", "http://127.0.0.1:1/"}, code: 1, stderr: "refused"},
		{name: "status of an answer", args: []string{"status", "POST", srv.URL + "/"}, stdout: "405"},
		{name: "status of a page", args: []string{"status", "GET", srv.URL + "/healthz"}, stdout: "200"},
		{name: "status without an answer", args: []string{"status", "GET", "http://127.0.0.1:1/"}, code: 1, stderr: "refused"},
		{name: "status without a method", args: []string{"status", srv.URL}, code: 2, stderr: "status takes a method and a URL"},
		{name: "a flag", args: []string{"--port", "9090"}, code: 2, stderr: `unknown argument "--port"`},
		{name: "another command", args: []string{"fetch", srv.URL}, code: 2, stderr: `unknown argument "fetch"`},
		{name: "get without a URL", args: []string{"get"}, code: 2, stderr: "get takes one URL"},
		{name: "get with two URLs", args: []string{"get", srv.URL, srv.URL}, code: 2, stderr: "get takes one URL"},
		// In order: the file written is the one read.
		{name: "cat of no file", args: []string{"cat", file}, code: 1, stderr: "no such file"},
		{name: "write", args: []string{"write", file, "kept on the volume"}},
		{name: "cat", args: []string{"cat", file}, stdout: "kept on the volume"},
		{name: "write into no directory", args: []string{"write", filepath.Join(file, "x"), "text"}, code: 1, stderr: "not a directory"},
		{name: "write without text", args: []string{"write", file}, code: 2, stderr: "write takes a file and a text"},
		{name: "cat of two files", args: []string{"cat", file, file}, code: 2, stderr: "cat takes one file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := run(t.Context(), tt.args, &stdout, &stderr)
			if code != tt.code || !strings.Contains(stdout.String(), tt.stdout) || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, %q, %q", tt.args, code, stdout.String(), stderr.String(), tt.code, tt.stdout, tt.stderr)
			}
			if tt.code == 2 && !strings.Contains(stderr.String(), "usage:") {
				t.Errorf("run(%q): a usage error without the usage: %q", tt.args, stderr.String())
			}
		})
	}
}
