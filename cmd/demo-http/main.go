// Command demo-http is the small HTTP server nephele's real-node tests and `nephele up
// --smoke` deploy: GET / answers a JSON object naming the pod and the node that served
// it (from the downward API environment variables POD_NAME, POD_NAMESPACE, POD_IP and
// NODE_NAME), and GET /healthz answers "ok". It listens on :$PORT (8080 by default) and
// shuts down gracefully on SIGTERM. It is a static Go binary packed into an image by
// package images.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
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
		Handler:           handler(os.Getenv),
		ReadHeaderTimeout: 10 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Printf("demo-http: serving on :%s as pod %s on node %s\n", port, os.Getenv("POD_NAME"), os.Getenv("NODE_NAME"))
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
