package localcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/localcloud/client"
)

// WaitForCloud waits until the local cloud p started writes its address to addrFile
// and answers /healthz, and returns its URL and a client using token. With caFile (the
// cloud's --serving-ca-file, written before the address) the URL is https and the
// client verifies the cloud against it. It fails early, naming p's log, when p exits.
func WaitForCloud(ctx context.Context, p *controlplane.Process, addrFile, caFile, token, userAgent string) (string, *client.Client, error) {
	var addr string
	err := p.WaitFor(ctx, "the local cloud's address file", func(context.Context) error {
		raw, err := os.ReadFile(addrFile)
		addr = strings.TrimSpace(string(raw))
		if err == nil && addr == "" {
			err = errors.New("empty")
		}
		return err
	})
	if err != nil {
		return "", nil, err
	}
	url, ca := "http://"+addr, []byte(nil)
	if caFile != "" {
		if ca, err = os.ReadFile(caFile); err != nil {
			return "", nil, fmt.Errorf("the local cloud's CA certificate: %w", err)
		}
		url = "https://" + addr
	}
	c, err := client.New(url, token, client.WithUserAgent(userAgent), client.WithCA(ca))
	if err != nil {
		return "", nil, err
	}
	if err := p.WaitFor(ctx, "the local cloud's /healthz", c.Healthy); err != nil {
		return "", nil, err
	}
	return url, c, nil
}

// WaitForCCM waits until the cloud-controller-manager p serves /healthz at url (its
// secure port). It fails early, naming p's log, when p exits.
func WaitForCCM(ctx context.Context, p *controlplane.Process, url string) error {
	// The CCM serves with a self-signed certificate made in memory: nothing to verify
	// it against, and /healthz carries nothing secret.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
		DisableKeepAlives: true,
	}}
	return p.WaitFor(ctx, "the cloud-controller-manager's /healthz", func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /healthz: %s", resp.Status)
		}
		return nil
	})
}
