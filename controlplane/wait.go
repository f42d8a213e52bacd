package controlplane

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"
)

// withStartTimeout applies the default startup bound to a context without a deadline.
func withStartTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, startTimeout)
}

// freePorts returns n distinct ports that were free a moment ago. All listeners stay
// open until every port is chosen, so the n ports differ.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitHTTP waits until url answers 200 OK, over TLS with tlsConfig for an https URL.
func waitHTTP(ctx context.Context, p *Process, url string, tlsConfig *tls.Config) error {
	// No keep-alive: nothing of the probe should linger once the process is up.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: tlsConfig}}
	return p.WaitFor(ctx, url, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	})
}

// WaitFor calls check until it succeeds, for readiness the caller knows how to probe (a
// port, a file, an object), failing early when the process exits, with the end of its
// log, and with check's last error when ctx ends. what names the wait in the error.
func (p *Process) WaitFor(ctx context.Context, what string, check func(context.Context) error) error {
	const interval = 200 * time.Millisecond
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("waiting for %s: %w", what, p.exitedError())
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, context.Cause(ctx), err)
		case <-tick.C:
		}
	}
}
