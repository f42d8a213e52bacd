// Command demo-http is the small HTTP server nephele's real-node tests and `nephele up
// --smoke` deploy: GET / answers a JSON object naming the pod and the node that served
// it (from the downward API environment variables POD_NAME, POD_NAMESPACE, POD_IP and
// NODE_NAME), and GET /healthz answers "ok". It listens on :$PORT (8080 by default) and
// shuts down gracefully on SIGTERM. It is a static Go binary packed into an image by
// package images.
//
// `demo-http get URL` is its client, the one other program in the image: it GETs URL
// (within 3 seconds), prints the body and exits 0 on a 200 answer, else prints why and
// exits 1. Run with `kubectl exec`, it is how a test reaches one pod from another.
//
// `demo-http status METHOD URL` is its probe: it sends METHOD to URL with no body and no
// credentials (within 3 seconds, an https server's certificate unverified: the probe
// asks what a pod gets, not whom it talks to), prints the answer's status code and exits
// 0 on any answer, or prints why none came and exits 1. Run from a pod, it shows what
// the machine's listeners answer a pod (nephele up --smoke's refusal checks).
//
// `demo-http write FILE TEXT` writes TEXT to FILE (created or replaced, 0644) and syncs
// it to its disk; `demo-http cat FILE` prints FILE. They are how a test checks a volume:
// data written in one pod is read in another.
//
// Any other argument is a usage error (exit 2) naming it: the server takes none, so a
// container's args meant for something else do not turn it into a client.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Answer is the body of GET /.
type Answer struct {
	Pod       string `json:"pod"`
	Namespace string `json:"namespace"`
	PodIP     string `json:"podIP"`
	Node      string `json:"node"`
	// Client is the address the request came from, as the pod saw it: after any SNAT on
	// the way, so tests can tell whether the source address was kept.
	Client string `json:"client"`
}

// getTimeout bounds `demo-http get`: a pod that cannot be reached fails at once or not
// at all, and a test waiting on it should not hang.
const getTimeout = 3 * time.Second

// usage is the command line.
const usage = "usage: demo-http (serve on :$PORT) | demo-http get URL | demo-http status METHOD URL | demo-http write FILE TEXT | demo-http cat FILE"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args and returns the exit code: 0, 1 when serving or the
// GET failed, 2 for a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var err error
	switch {
	case len(args) == 0:
		err = serve(ctx)
	case args[0] == "get" && len(args) == 2:
		err = get(ctx, stdout, args[1])
	case args[0] == "get":
		fmt.Fprintf(stderr, "demo-http: get takes one URL, got %q\n%s\n", args[1:], usage)
		return 2
	case args[0] == "status" && len(args) == 3:
		err = status(ctx, stdout, args[1], args[2])
	case args[0] == "status":
		fmt.Fprintf(stderr, "demo-http: status takes a method and a URL, got %q\n%s\n", args[1:], usage)
		return 2
	case args[0] == "write" && len(args) == 3:
		err = writeFile(args[1], args[2])
	case args[0] == "write":
		fmt.Fprintf(stderr, "demo-http: write takes a file and a text, got %q\n%s\n", args[1:], usage)
		return 2
	case args[0] == "cat" && len(args) == 2:
		err = catFile(stdout, args[1])
	case args[0] == "cat":
		fmt.Fprintf(stderr, "demo-http: cat takes one file, got %q\n%s\n", args[1:], usage)
		return 2
	default:
		fmt.Fprintf(stderr, "demo-http: unknown argument %q\n%s\n", args[0], usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "demo-http:", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context) error {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	srv := &http.Server{
		Addr:              ":" + port,
		Handler:           handler(podEnv),
		ReadHeaderTimeout: 10 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Printf("demo-http: serving on :%s as pod %s on node %s\n", port, podEnv("POD_NAME"), podEnv("NODE_NAME"))
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// podEnv reads the downward API variables. Without POD_NAME (a pod made by `kubectl
// create deployment`, say) the pod's name is its host name, which kubelet sets to it.
func podEnv(name string) string {
	v := os.Getenv(name)
	if v == "" && name == "POD_NAME" {
		v, _ = os.Hostname()
	}
	return v
}

// handler serves / and /healthz; getenv reads the downward API variables.
func handler(getenv func(string) string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Answer{
			Pod:       getenv("POD_NAME"),
			Namespace: getenv("POD_NAMESPACE"),
			PodIP:     getenv("POD_IP"),
			Node:      getenv("NODE_NAME"),
			Client:    r.RemoteAddr,
		})
	})
	return mux
}

// get runs `demo-http get URL`: it writes the body of a 200 answer to w.
func get(ctx context.Context, w io.Writer, url string) error {
	ctx, cancel := context.WithTimeout(ctx, getTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := podClient(false).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	_, err = w.Write(body)
	return err
}

// status runs `demo-http status METHOD URL`: it writes the answer's status code to w.
func status(ctx context.Context, w io.Writer, method, url string) error {
	ctx, cancel := context.WithTimeout(ctx, getTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return err
	}
	resp, err := podClient(true).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_, err = fmt.Fprintln(w, resp.StatusCode)
	return err
}

// podClient is the HTTP client of get and, with probe, of status. Pods have no proxy and
// no DNS beyond the cluster's: it never asks the environment. A probe asks what answers
// a pod, which holds no CA of the machine's listeners, and sends no credential, so it
// verifies no certificate (an impostor would learn nothing) and reports the status of
// the URL itself, not of where it redirects.
func podClient(probe bool) *http.Client {
	t := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	hc := &http.Client{Transport: t}
	if probe {
		t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // see above
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return hc
}

// writeFile writes text to path and syncs it, so that the data is on the volume's disk
// when the command returns, not only in the node's page cache.
func writeFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}

// catFile prints the file at path.
func catFile(stdout io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(stdout, f)
	return err
}
