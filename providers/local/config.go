package local

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/nephele-dev/nephele/internal/smallfile"

	"k8s.io/apimachinery/pkg/util/validation"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/nephele-dev/nephele/cloud"
)

// Defaults of Config's optional fields.
const (
	// DefaultRequestTimeout bounds one HTTP request to the local cloud.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultListPageSize is the page size of instance listings: the largest page the
	// local cloud serves, because every page is a counted cloud call and a listing is
	// what the shared inventory costs (5,000 instances: 5 calls, not 50).
	DefaultListPageSize = maxListPageSize
	// maxListPageSize is the largest page the local cloud serves.
	maxListPageSize = 1000
	// maxConfigSize bounds the cloud config read from --cloud-config.
	maxConfigSize = 1 << 20
	// ProxyHealthzOff is the ProxyHealthzPort that turns kube-proxy health checks off.
	ProxyHealthzOff = -1
)

// Config is the provider's configuration, the --cloud-config file:
//
//	endpoint: http://127.0.0.1:8990   # required: the local cloud's base URL
//	tokenFile: /etc/localcloud/token  # or token: <the token>; exactly one
//	caFile: /etc/localcloud/ca.crt    # with an https endpoint: or caData: <PEM>; at most one
//	requestTimeout: 30s               # optional: bound on one HTTP request
//	listPageSize: 100                 # optional: instances per listing page, 1-1000
//	proxyHealthzPort: 10256           # optional: kube-proxy's healthz port, -1 for none
//	providerIDScheme: local           # optional: the scheme of the provider IDs it writes
type Config struct {
	// Endpoint is the local cloud's base URL, "http://host:port" or "https://host:port".
	Endpoint string
	// Token is the API bearer token, given inline or read from a file.
	Token string
	// CA is the PEM certificate authority an https endpoint's certificate is verified
	// against (localcloud --serving-ca-file), given inline or read from a file; nil
	// verifies against the system's roots.
	CA []byte
	// RequestTimeout bounds each HTTP request (a listing of many pages gets it per page).
	RequestTimeout time.Duration
	// ListPageSize is the page size of instance listings.
	ListPageSize int
	// ProxyHealthzPort is the port of kube-proxy's /healthz on every node. Load
	// balancers of Services with externalTrafficPolicy Cluster health-check each
	// backend there, as real clouds do: kube-proxy answers 503 for a node the cluster
	// autoscaler is removing or that is being deleted (KEP-3836), so the load balancer
	// drains it. 0 means cloud.KubeProxyHealthzPort; ProxyHealthzOff checks those
	// backends with a TCP connect to the node port instead, for nodes without kube-proxy.
	ProxyHealthzPort int32
	// ProviderIDScheme is the scheme of the provider IDs the provider writes and reads
	// ("local://i-…"), and so its one platform (cloud.PlatformLister). Two local clouds in
	// one cluster take one each, so that a node's provider ID names its cloud. Empty
	// means ProviderName.
	ProviderIDScheme string
	// NoRouteBatch turns off the batch capability (cloud.RouteBatcher: routes.apply,
	// up to api.MaxRouteChanges changes a call): routes are then created and deleted
	// one call each, as by a provider whose cloud has no route table to replace.
	NoRouteBatch bool
	// Files are the files the configuration named (tokenFile, caFile): a change to one
	// reloads the provider (cloud.ConfigFileLister).
	Files []string
}

// File is the cloud config file's shape: what LoadConfig reads, and what a tool that
// writes one for the local provider (nephele up, the tests, the benchmarks) marshals with
// Marshal rather than printing YAML itself. Durations are strings so that a bad value is
// reported with its field's name.
type File struct {
	Endpoint       string `json:"endpoint"`
	Token          string `json:"token,omitempty"`
	TokenFile      string `json:"tokenFile,omitempty"`
	CAFile         string `json:"caFile,omitempty"`
	CAData         string `json:"caData,omitempty"`
	RequestTimeout string `json:"requestTimeout,omitempty"`
	ListPageSize   *int   `json:"listPageSize,omitempty"`
	// ProxyHealthzPort is an int64 so that a value out of range is reported as such,
	// not as a decoding error.
	ProxyHealthzPort *int64 `json:"proxyHealthzPort,omitempty"`
	ProviderIDScheme string `json:"providerIDScheme,omitempty"`
	// RouteBatch, unset or true, lets the route controller change many routes in one
	// call; false makes it change them one call each (Config.NoRouteBatch).
	RouteBatch *bool `json:"routeBatch,omitempty"`
}

// Marshal returns f as the YAML of a --cloud-config file, after a comment line saying
// who wrote it (writer), so a person who finds the file knows where it comes from.
func (f File) Marshal(writer string) ([]byte, error) {
	data, err := yaml.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("local cloud config: %w", err)
	}
	return append([]byte("# The local provider's --cloud-config, written by "+writer+".\n"), data...), nil
}

// ConfigError lists everything wrong with a cloud config, one problem per entry, each
// naming its field.
type ConfigError struct {
	Problems []string
}

// Error implements error.
func (e *ConfigError) Error() string {
	return "local cloud config (--cloud-config): " + strings.Join(e.Problems, "; ")
}

// LoadConfig reads a cloud config. Decoding is strict: unknown fields, duplicate keys and
// values of the wrong type are errors, as are a missing endpoint, both or neither of
// token and tokenFile, and a tokenFile that cannot be read or is empty.
func LoadConfig(r io.Reader) (*Config, error) {
	if r == nil {
		return nil, &ConfigError{Problems: []string{"no --cloud-config given: the local provider needs at least endpoint and token or tokenFile"}}
	}
	raw, err := io.ReadAll(io.LimitReader(r, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("local cloud config: reading: %w", err)
	}
	if len(raw) > maxConfigSize {
		return nil, &ConfigError{Problems: []string{fmt.Sprintf("larger than %d bytes", maxConfigSize)}}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, &ConfigError{Problems: []string{"the file is empty: the local provider needs at least endpoint and token or tokenFile"}}
	}
	// YAMLToJSONStrict refuses duplicate keys; the JSON decoding that follows is case
	// sensitive, so "tokenfile" is an unknown field rather than tokenFile.
	js, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return nil, &ConfigError{Problems: []string{decodeProblem(err)}}
	}
	var fc File
	strict, err := sigsjson.UnmarshalStrict(js, &fc, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, &ConfigError{Problems: []string{decodeProblem(err)}}
	}
	if len(strict) > 0 {
		problems := make([]string, 0, len(strict))
		for _, e := range strict {
			problems = append(problems, decodeProblem(e))
		}
		return nil, &ConfigError{Problems: problems}
	}
	return fc.validate()
}

func (fc *File) validate() (*Config, error) {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	cfg := &Config{Endpoint: strings.TrimSpace(fc.Endpoint), RequestTimeout: DefaultRequestTimeout, ListPageSize: DefaultListPageSize,
		ProxyHealthzPort: cloud.KubeProxyHealthzPort, ProviderIDScheme: ProviderName}

	if cfg.Endpoint == "" {
		add("endpoint: required: the local cloud's URL, such as http://127.0.0.1:8990")
	} else if err := checkEndpoint(cfg.Endpoint); err != nil {
		add("endpoint: %v", err)
	}

	switch {
	case fc.Token != "" && fc.TokenFile != "":
		add("token and tokenFile: give exactly one, not both")
	case fc.Token == "" && fc.TokenFile == "":
		add("token or tokenFile: one is required")
	case fc.Token != "":
		cfg.Token = strings.TrimSpace(fc.Token)
		if cfg.Token == "" {
			add("token: only white space")
		}
	default:
		tok, err := readToken(fc.TokenFile)
		if err != nil {
			add("tokenFile: %v", err)
		}
		cfg.Token = tok
		cfg.Files = append(cfg.Files, fc.TokenFile)
	}

	https := strings.HasPrefix(cfg.Endpoint, "https://")
	switch {
	case fc.CAFile != "" && fc.CAData != "":
		add("caFile and caData: give at most one, not both")
	case (fc.CAFile != "" || fc.CAData != "") && !https:
		add("caFile, caData: only for an https endpoint; the endpoint is %q", cfg.Endpoint)
	case fc.CAFile != "":
		cfg.Files = append(cfg.Files, fc.CAFile)
		ca, err := readSmall(fc.CAFile)
		if err != nil {
			add("caFile: %v", err)
		} else if cfg.CA = ca; !x509.NewCertPool().AppendCertsFromPEM(ca) {
			add("caFile: %s holds no PEM certificate", fc.CAFile)
		}
	case fc.CAData != "":
		if cfg.CA = []byte(fc.CAData); !x509.NewCertPool().AppendCertsFromPEM(cfg.CA) {
			add("caData: no PEM certificate")
		}
	}

	if fc.RequestTimeout != "" {
		d, err := time.ParseDuration(fc.RequestTimeout)
		switch {
		case err != nil:
			add("requestTimeout: %q is not a duration such as 30s", fc.RequestTimeout)
		case d <= 0:
			add("requestTimeout: %s: must be positive", fc.RequestTimeout)
		default:
			cfg.RequestTimeout = d
		}
	}

	if fc.ListPageSize != nil {
		if n := *fc.ListPageSize; n < 1 || n > maxListPageSize {
			add("listPageSize: %d: want 1-%d", n, maxListPageSize)
		} else {
			cfg.ListPageSize = n
		}
	}

	if fc.ProxyHealthzPort != nil {
		if n := *fc.ProxyHealthzPort; n != ProxyHealthzOff && (n < 1 || n > math.MaxUint16) {
			add("proxyHealthzPort: %d: want 1-65535, or -1 for no kube-proxy health checks", n)
		} else {
			cfg.ProxyHealthzPort = int32(n)
		}
	}

	if fc.ProviderIDScheme != "" {
		if err := checkScheme(fc.ProviderIDScheme); err != nil {
			add("providerIDScheme: %v", err)
		} else {
			cfg.ProviderIDScheme = fc.ProviderIDScheme
		}
	}

	cfg.NoRouteBatch = fc.RouteBatch != nil && !*fc.RouteBatch

	if len(problems) > 0 {
		return nil, &ConfigError{Problems: problems}
	}
	return cfg, nil
}

// checkScheme accepts a provider-ID scheme: a DNS label (lower-case letters, digits
// and '-'), which is what a provider ID's scheme, a platform label's value and
// --cloud-provider-platforms all hold.
func checkScheme(s string) error {
	if errs := validation.IsDNS1123Label(s); len(errs) > 0 {
		return fmt.Errorf("%q: %s", s, strings.Join(errs, "; "))
	}
	return nil
}

// checkEndpoint accepts an http or https URL with a host and no query or fragment.
func checkEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not an http:// or https:// URL: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: want an http:// or https:// URL", s)
	}
	if u.Host == "" {
		return fmt.Errorf("%q: the URL has no host", s)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%q: want a base URL without user info, query or fragment", s)
	}
	return nil
}

// readToken reads a token file; surrounding white space is ignored, as the local
// cloud's --token-file does.
func readToken(path string) (string, error) {
	raw, err := readSmall(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(raw))
	if tok == "" {
		return "", errors.New(path + " is empty")
	}
	return tok, nil
}

// decodeProblem turns a sigs.k8s.io/yaml error into one line without the decoder's
// layered prefixes, which only repeat that decoding failed. The JSON decoder's
// messages name the field ("unknown field \"tokenfile\"", "... Go struct field
// File.endpoint of type string").
func decodeProblem(err error) string {
	msg := err.Error()
	for _, p := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: ", "error converting YAML to JSON: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	msg = strings.ReplaceAll(msg, "Go struct field File.", "field ")
	return "not valid YAML for the local provider: " + strings.Join(strings.Fields(msg), " ")
}

// readSmall reads a file the config names, refusing one over maxConfigSize: a path to a
// device or a huge file must not stall or exhaust the manager at start.
func readSmall(path string) ([]byte, error) { return smallfile.Read(path, maxConfigSize) }
