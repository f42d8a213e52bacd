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
package main

import (
	"context"
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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if len(os.Args) > 1 {
		if err := client(ctx, os.Stdout, os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "demo-http:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "demo-http:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
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

// client runs `demo-http get URL`: it writes the body of a 200 answer to w.
func client(ctx context.Context, w io.Writer, args []string) error {
	if len(args) != 2 || args[0] != "get" {
		return fmt.Errorf("usage: demo-http [get URL]; got %q", args)
	}
	ctx, cancel := context.WithTimeout(ctx, getTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[1], nil)
	if err != nil {
		return err
	}
	// Pods have no proxy and no DNS beyond the cluster's: never ask the environment.
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("GET %s: %w", args[1], err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", args[1], resp.Status, body)
	}
	_, err = w.Write(body)
	return err
}
