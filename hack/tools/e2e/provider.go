package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/test/e2e/framework"
	"sigs.k8s.io/yaml"
)

// ProviderName is the e2e framework provider name of nephele's local cloud (--provider).
// "local" is taken: upstream's framework registers it as a null provider.
const ProviderName = "nephele"

// providerIDScheme is the scheme of the provider IDs the local provider gives Nodes
// (local://<instance ID>).
const providerIDScheme = "local"

// callTimeout bounds one call to the local cloud's API.
const callTimeout = 30 * time.Second

// CloudConfig is the part of the local provider's cloud config (providers/local.File,
// the file `nephele up` writes for its cloud-controller-manager) that the e2e provider
// reads: where the local cloud's API is, its bearer token, and the CA certificate its
// HTTPS is verified with.
type CloudConfig struct {
	Endpoint  string `json:"endpoint"`
	Token     string `json:"token,omitempty"`
	TokenFile string `json:"tokenFile,omitempty"`
	CAFile    string `json:"caFile,omitempty"`
	CAData    string `json:"caData,omitempty"`
}

// LoadCloudConfig reads a cloud config file and resolves its token.
func LoadCloudConfig(path string) (CloudConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return CloudConfig{}, fmt.Errorf("nephele cloud config: %w", err)
	}
	var c CloudConfig
	// Not strict: the file has fields for the cloud-controller-manager this provider does
	// not need.
	if err := yaml.Unmarshal(data, &c); err != nil {
		return CloudConfig{}, fmt.Errorf("nephele cloud config %s: %w", path, err)
	}
	if c.Endpoint == "" {
		return CloudConfig{}, fmt.Errorf("nephele cloud config %s: endpoint is required", path)
	}
	if c.TokenFile != "" {
		tok, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return CloudConfig{}, fmt.Errorf("nephele cloud config %s: %w", path, err)
		}
		c.Token = strings.TrimSpace(string(tok))
	}
	if c.Token == "" {
		return CloudConfig{}, fmt.Errorf("nephele cloud config %s: token or tokenFile is required", path)
	}
	if c.CAFile != "" {
		ca, err := os.ReadFile(c.CAFile)
		if err != nil {
			return CloudConfig{}, fmt.Errorf("nephele cloud config %s: %w", path, err)
		}
		c.CAData = string(ca)
	}
	return c, nil
}

// Provider is the e2e framework provider of nephele's local cloud. Everything but
// DeleteNode is upstream's null provider: the load balancer tests need nothing of a
// provider (--provider=skeleton runs them the same way).
type Provider struct {
	framework.NullProvider
	cloud CloudConfig
	http  *http.Client
}

// NewProvider returns the provider for the local cloud cfg describes; with a CA, an
// https cloud is verified against it alone.
func NewProvider(cfg CloudConfig) (*Provider, error) {
	hc := &http.Client{Timeout: callTimeout}
	if cfg.CAData != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(cfg.CAData)) {
			return nil, errors.New("nephele cloud config: caFile or caData holds no PEM certificate")
		}
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	return &Provider{cloud: cfg, http: hc}, nil
}

// DeleteNode terminates node's instance through the local cloud's API, as a person
// deleting the machine in a cloud's console would; the cloud-controller-manager's node
// lifecycle controller then deletes the Node. The framework's interface has no context,
// so the call is bounded by callTimeout.
func (p *Provider) DeleteNode(node *v1.Node) error {
	id, err := instanceID(node)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	u := strings.TrimSuffix(p.cloud.Endpoint, "/") + "/v1/instances/" + url.PathEscape(id) + "/terminate"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return fmt.Errorf("terminate instance %s of node %s: %w", id, node.Name, err)
	}
	req.Header.Set("Authorization", "Bearer "+p.cloud.Token)
	resp, err := p.http.Do(req)
	if err != nil {
		return fmt.Errorf("terminate instance %s of node %s: %w", id, node.Name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("terminate instance %s of node %s: %s: %s", id, node.Name, resp.Status, strings.TrimSpace(string(body)))
	}
	framework.Logf("terminated instance %s of node %s through the local cloud", id, node.Name)
	return nil
}

// instanceID is the local cloud's instance ID in node's provider ID (local://<id>).
func instanceID(node *v1.Node) (string, error) {
	scheme, id, ok := strings.Cut(node.Spec.ProviderID, "://")
	switch {
	case node.Spec.ProviderID == "":
		return "", fmt.Errorf("node %s has no provider ID: the cloud-controller-manager has not initialized it", node.Name)
	case !ok || id == "":
		return "", fmt.Errorf("node %s: provider ID %q is not <provider>://<id>", node.Name, node.Spec.ProviderID)
	case scheme != providerIDScheme:
		return "", fmt.Errorf("node %s: provider ID %q is not the local cloud's (%s://)", node.Name, node.Spec.ProviderID, providerIDScheme)
	}
	return id, nil
}

// errNoCloudConfig is the factory's answer without --nephele-cloud-config.
var errNoCloudConfig = errors.New("--provider=" + ProviderName + " needs --nephele-cloud-config (the cloud config nephele up writes)")
