package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nephele-dev/nephele/localcluster"
	"github.com/nephele-dev/nephele/operator/install"
)

// checkOperatorServing reads the running operator's health and metrics on its node's
// address: /readyz open, /metrics refused without a token and served with one the API
// server authorizes.
func checkOperatorServing(t *testing.T, c *localcluster.Cluster, cl client.Client) {
	t.Helper()
	var pods corev1.PodList
	if err := cl.List(t.Context(), &pods, client.InNamespace(install.DefaultNamespace)); err != nil || len(pods.Items) == 0 {
		t.Fatalf("the operator's pods: %d, %v", len(pods.Items), err)
	}
	base := "https://" + net.JoinHostPort(pods.Items[0].Status.HostIP, strconv.Itoa(install.SecurePort))
	// The operator's certificate is self-signed, as the CCM's.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(ctx context.Context, path, token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(body), err
	}
	within(t, "the operator's /readyz, /metrics without and with a token", func(ctx context.Context) error {
		if code, body, err := get(ctx, "/readyz", ""); err != nil || code != http.StatusOK {
			return fmt.Errorf("/readyz: %d %q %v", code, body, err)
		}
		if code, _, err := get(ctx, "/metrics", ""); err != nil || code != http.StatusUnauthorized {
			return fmt.Errorf("/metrics without a token: %d %v, want 401", code, err)
		}
		code, body, err := get(ctx, "/metrics", c.Env.Token)
		if err != nil || code != http.StatusOK || !strings.Contains(body, "controller_runtime_reconcile_total") {
			return fmt.Errorf("/metrics with the admin's token: %d %v, body has reconcile counts: %t", code, err, strings.Contains(body, "controller_runtime_reconcile_total"))
		}
		return nil
	})
}
