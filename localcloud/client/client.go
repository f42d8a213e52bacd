package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/localcloud/api"
)

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// Client talks to one local cloud. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	token     string
	hc        *http.Client
	userAgent string
	// minimal asks for minimal answers to load balancer writes (WithMinimalAnswers).
	minimal bool
	// optErr is what an option found wrong; New returns it.
	optErr error
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send requests with hc instead of its own.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithTimeout bounds each request, its answer's body included, to d on the client's own
// HTTP client; a request that takes longer fails as a temporary error. It has no effect
// on a client given by WithHTTPClient after it.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) {
		hc := *c.hc
		hc.Timeout = d
		c.hc = &hc
	}
}

// WithMinimalAnswers asks the cloud to answer load balancer writes (EnsureLoadBalancer,
// UpdateLoadBalancerBackends) without the backends and their health (Prefer:
// return=minimal, RFC 7240): the VIP, ports and any data plane error still come back.
// For callers that send thousands of backends and need none of them back.
func WithMinimalAnswers() Option { return func(c *Client) { c.minimal = true } }

// WithCA makes the client verify an https cloud's certificate against caPEM (the
// authority's certificate the cloud wrote, localcloud --serving-ca-file) instead of the
// system's roots; nil changes nothing. It changes the transport of the client's HTTP
// client as it is when the option applies; New fails on PEM without a certificate.
func WithCA(caPEM []byte) Option {
	return func(c *Client) {
		if caPEM == nil {
			return
		}
		cfg, err := TLSConfig(caPEM)
		if err != nil {
			c.optErr = errors.Join(c.optErr, err)
			return
		}
		t, ok := c.hc.Transport.(*http.Transport)
		if !ok {
			c.optErr = errors.Join(c.optErr, fmt.Errorf("local cloud client: WithCA on a %T transport", c.hc.Transport))
			return
		}
		t = t.Clone()
		t.TLSClientConfig = cfg
		hc := *c.hc
		hc.Transport = t
		c.hc = &hc
	}
}

// TLSConfig returns the TLS configuration that verifies an https cloud against caPEM
// alone, for callers that make their own transport (a proxy in front of the cloud).
func TLSConfig(caPEM []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("local cloud client: the CA holds no PEM certificate")
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client for the local cloud at baseURL ("http://127.0.0.1:8990") that
// authenticates with token. Requests have no timeout of their own: bound them with
// the context.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("local cloud URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("local cloud URL %q: want http://host:port", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if token == "" {
		return nil, errors.New("local cloud client: an API token is required")
	}
	c := &Client{
		base:      u,
		token:     token,
		userAgent: "nephele-localcloud-client",
		hc: &http.Client{Transport: &http.Transport{
			Proxy:               nil, // a local cloud is never behind the environment's proxy
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
		}},
	}
	for _, o := range opts {
		o(c)
	}
	if c.optErr != nil {
		return nil, c.optErr
	}
	return c, nil
}

// Error is an error answer from the local cloud. Its Unwrap returns the provider
// contract's sentinel the status calls for: cloud.ErrNotFound for a 404 whose reason is
// NotFound (a 404 from an unknown endpoint or a proxy is not a positive "gone"),
// cloud.ErrInvalid for 400 and cloud.ErrNotImplemented for 501. Throttling (429)
// comes as a *cloud.ThrottledError wrapping the *Error. Every other status is a
// temporary failure matching no sentinel.
type Error struct {
	// Method and Path are the request's.
	Method, Path string
	// StatusCode is the HTTP status.
	StatusCode int
	// Reason, Message and Field come from the answer's JSON body, if it had one.
	Reason  api.Reason
	Message string
	Field   string

	sentinel error
}

// Error implements error.
func (e *Error) Error() string {
	msg := fmt.Sprintf("local cloud: %s %s: %d", e.Method, e.Path, e.StatusCode)
	if e.Reason != "" {
		msg += " " + string(e.Reason)
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Unwrap returns the contract's sentinel error for the answer, or nil.
func (e *Error) Unwrap() error { return e.sentinel }

// answerError turns a non-2xx answer into an error.
func answerError(req *http.Request, resp *http.Response) error {
	e := &Error{Method: req.Method, Path: req.URL.Path, StatusCode: resp.StatusCode}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var body api.Error
	if json.Unmarshal(raw, &body) == nil && (body.Message != "" || body.Reason != "") {
		e.Reason, e.Message, e.Field = body.Reason, body.Message, body.Field
	} else {
		e.Message = strings.TrimSpace(string(raw))
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		if e.Reason == api.ReasonNotFound {
			e.sentinel = cloud.ErrNotFound
		}
	case http.StatusBadRequest:
		e.sentinel = cloud.ErrInvalid
	case http.StatusConflict:
		switch e.Reason {
		case api.ReasonAlreadyExists:
			e.sentinel = cloud.ErrAlreadyExists
		case api.ReasonLimitExceeded:
			e.sentinel = cloud.ErrLimitExceeded
		default:
			e.sentinel = cloud.ErrConflict
		}
	case http.StatusNotImplemented:
		e.sentinel = cloud.ErrNotImplemented
	case http.StatusTooManyRequests:
		return cloud.Throttled(parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()), e)
	}
	return e
}

// parseRetryAfter reads Retry-After as seconds or an HTTP date; 0 when absent or bad.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 || secs > 1<<31 {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// do sends a request and decodes a 2xx JSON answer into out (unless out is nil).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	return c.doWith(ctx, method, path, query, nil, in, out)
}

// doWith is do with extra request headers.
func (c *Client) doWith(ctx context.Context, method, path string, query url.Values, header http.Header, in, out any) error {
	u, err := c.url(path)
	if err != nil {
		return fmt.Errorf("local cloud: %s %s: %w", method, path, err)
	}
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("local cloud: %s %s: encoding the request: %w", method, path, err)
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return fmt.Errorf("local cloud: %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("User-Agent", c.userAgent)
	req.Header.Set("Accept", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// Network failures are temporary: never a positive "gone".
		return fmt.Errorf("local cloud: %s %s: %w", method, path, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return answerError(req, resp)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("local cloud: %s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// url returns the URL of an API path whose segments are already escaped.
func (c *Client) url(escapedPath string) (url.URL, error) {
	u := *c.base
	raw := c.base.EscapedPath() + escapedPath
	p, err := url.PathUnescape(raw)
	if err != nil {
		return url.URL{}, err
	}
	u.Path, u.RawPath = p, raw
	return u, nil
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }

// Healthy returns nil when the local cloud answers /healthz.
func (c *Client) Healthy(ctx context.Context) error {
	u, err := c.url("/healthz")
	if err != nil {
		return fmt.Errorf("local cloud: health check: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("local cloud: health check: %w", err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("local cloud: health check: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("local cloud: health check: status %d", resp.StatusCode)
	}
	return nil
}
