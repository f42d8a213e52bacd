package manager

import (
	"crypto/tls"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/version"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/nephele-dev/nephele/manager/features"
	"github.com/nephele-dev/nephele/manager/serving"
)

// RequestHeaderOptions are upstream's --requestheader-* flags: a front proxy that
// presents a client certificate signed by ClientCAFile (and, when AllowedNames is set,
// with one of those common names) may say who the user is in request headers.
type RequestHeaderOptions struct {
	// ClientCAFile is --requestheader-client-ca-file.
	ClientCAFile string
	// AllowedNames is --requestheader-allowed-names; empty allows any name the CA signed.
	AllowedNames []string
	// UsernameHeaders, UIDHeaders and GroupHeaders are --requestheader-username-headers,
	// --requestheader-uid-headers and --requestheader-group-headers.
	UsernameHeaders, UIDHeaders, GroupHeaders []string
	// ExtraHeaderPrefixes is --requestheader-extra-headers-prefix.
	ExtraHeaderPrefixes []string
}

// WebhookOptions are upstream's flags for cloud provider webhooks (KEP-2699, alpha).
// nephele has no webhooks: the flags that only configure the webhook server are accepted
// and do nothing, as upstream's do while --webhooks enables none; --webhooks naming a
// webhook is refused.
type WebhookOptions struct {
	// Webhooks is --webhooks.
	Webhooks []string
	// The webhook server's settings, unused.
	BindAddress, CertDir, CertFile, KeyFile, MinVersion string
	SecurePort                                          int
	DisableHTTP2Serving                                 bool
	CipherSuites                                        []string
	CurvePreferences                                    []int32
	SNICertKeys                                         []cliflag.NamedCertKey
}

// newFeatureGates returns a fresh feature gate for NewOptions. Building it from
// upstream's and nephele's definitions fails only if two definitions compiled into the
// binary clash (features' tests catch that); then the gate is empty and the error is
// kept for Complete to report, so that nothing panics.
func newFeatureGates() (featuregate.MutableVersionedFeatureGate, error) {
	g, err := features.New()
	if err != nil {
		return featuregate.NewVersionedFeatureGate(features.Version), err
	}
	return g, nil
}

// addUpstreamFlags registers the flags of upstream's set that the rest of AddFlags does
// not: feature gates, the rest of secure serving and delegated authentication, logging,
// webhooks and --version.
func (o *Options) addUpstreamFlags(fs *pflag.FlagSet) {
	fs.Var(&featureGateFlag{o.FeatureGates}, "feature-gates",
		"A set of key=value pairs that describe feature gates for alpha/experimental features: upstream's "+
			"cloud-controller-manager gates and nephele's own (docs/manager.md says what each does here). Options are:\n"+
			strings.Join(features.Describe(o.FeatureGates), "\n"))
	fs.IntVar(&o.ConcurrentNodeStatusUpdates, "concurrent-node-status-updates", o.ConcurrentNodeStatusUpdates,
		"Number of workers concurrently updating node statuses. If unspecified or 0, --concurrent-node-syncs is used instead.")
	fs.BoolVar(&o.ContentionProfiling, "contention-profiling", o.ContentionProfiling,
		"Enable block profiling, if profiling is enabled")
	fs.StringVar(&o.ExternalCloudVolumePlugin, "external-cloud-volume-plugin", o.ExternalCloudVolumePlugin,
		"The plugin to use when cloud provider is set to external. Accepted as upstream's cloud-controller-manager accepts it: "+
			"only kube-controller-manager's volume plugins read it, and no CCM controller does.")

	// Secure serving, beside --secure-port, --bind-address and the certificate files.
	fs.StringVar(&o.TLSMinVersion, "tls-min-version", o.TLSMinVersion,
		"Minimum TLS version supported. Possible values: "+strings.Join(cliflag.TLSPossibleVersions(), ", "))
	fs.StringSliceVar(&o.TLSCipherSuites, "tls-cipher-suites", o.TLSCipherSuites,
		"Comma-separated list of cipher suites for the server. If omitted, the default Go cipher suites will be used.\n"+
			"Preferred values: "+strings.Join(cliflag.PreferredTLSCipherNames(), ", ")+".\n"+
			"Insecure values: "+strings.Join(cliflag.InsecureTLSCipherNames(), ", ")+".")
	fs.Int32SliceVar(&o.TLSCurvePreferences, "tls-curve-preferences", o.TLSCurvePreferences,
		"Comma-separated list of numeric Go crypto/tls CurveID values, as the allowed key exchange mechanisms, in order of preference. "+
			"If omitted, the default Go curve preferences will be used.")
	fs.Var(cliflag.NewNamedCertKeyArray(&o.SNICertKeys), "tls-sni-cert-key",
		"A pair of x509 certificate and private key file paths, optionally suffixed with a list of domain patterns which are fully qualified domain names, "+
			"possibly with prefixed wildcard segments. The domain patterns also allow IP addresses, but IPs should only be used if the apiserver has visibility "+
			"to the IP address requested by a client. If no domain patterns are provided, the names of the certificate are extracted. Non-wildcard matches "+
			"trump over wildcard matches, explicit domain patterns trump over extracted names. For multiple key/certificate pairs, use the --tls-sni-cert-key "+
			`multiple times. Examples: "example.crt,example.key" or "foo.crt,foo.key:*.foo.com,foo.com". Files are reloaded when they change.`)
	fs.StringVar(&o.CertDir, "cert-dir", o.CertDir,
		"The directory where the TLS certs are located. If --tls-cert-file and --tls-private-key-file are provided, this flag will be ignored. "+
			"Otherwise a self-signed certificate is written there (cloud-controller-manager.crt and .key) and used again at the next start; empty keeps it in memory.")
	fs.IntVar(&o.HTTP2MaxStreamsPerConnection, "http2-max-streams-per-connection", o.HTTP2MaxStreamsPerConnection,
		"The limit that the server gives to clients for the maximum number of streams in an HTTP/2 connection. Zero means to use golang's default.")
	fs.BoolVar(&o.DisableHTTP2Serving, "disable-http2-serving", o.DisableHTTP2Serving,
		"If true, HTTP2 serving will be disabled [default=false]")
	fs.BoolVar(&o.PermitPortSharing, "permit-port-sharing", o.PermitPortSharing,
		"If true, SO_REUSEPORT will be used when binding the port, which allows more than one instance to bind on the same address and port. [default=false]")
	fs.BoolVar(&o.PermitAddressSharing, "permit-address-sharing", o.PermitAddressSharing,
		"If true, SO_REUSEADDR will be used when binding the port. This allows binding to wildcard IPs like 0.0.0.0 and specific IPs in parallel, "+
			"and it avoids waiting for the kernel to release sockets in TIME_WAIT state. [default=false] "+
			"(nephele: Go binds every listener with SO_REUSEADDR, so this is always in effect.)")

	// Delegated authentication and authorization, beside the kubeconfigs and paths.
	fs.StringVar(&o.ClientCAFile, "client-ca-file", o.ClientCAFile,
		"If set, any request presenting a client certificate signed by one of the authorities in the client-ca-file is authenticated with an identity "+
			"corresponding to the CommonName of the client certificate. The file is reloaded when it changes.")
	fs.StringVar(&o.RequestHeader.ClientCAFile, "requestheader-client-ca-file", o.RequestHeader.ClientCAFile,
		"Root certificate bundle to use to verify client certificates on incoming requests before trusting usernames in headers specified by "+
			"--requestheader-username-headers. WARNING: generally do not depend on authorization being already done for incoming requests.")
	fs.StringSliceVar(&o.RequestHeader.AllowedNames, "requestheader-allowed-names", o.RequestHeader.AllowedNames,
		"List of client certificate common names to allow to provide usernames in headers specified by --requestheader-username-headers. "+
			"If empty, any client certificate validated by the authorities in --requestheader-client-ca-file is allowed.")
	fs.StringSliceVar(&o.RequestHeader.UsernameHeaders, "requestheader-username-headers", o.RequestHeader.UsernameHeaders,
		"List of request headers to inspect for usernames. X-Remote-User is common.")
	fs.StringSliceVar(&o.RequestHeader.UIDHeaders, "requestheader-uid-headers", o.RequestHeader.UIDHeaders,
		"List of request headers to inspect for UIDs. X-Remote-Uid is suggested. Requires the RemoteRequestHeaderUID feature to be enabled.")
	fs.StringSliceVar(&o.RequestHeader.GroupHeaders, "requestheader-group-headers", o.RequestHeader.GroupHeaders,
		"List of request headers to inspect for groups. X-Remote-Group is suggested.")
	fs.StringSliceVar(&o.RequestHeader.ExtraHeaderPrefixes, "requestheader-extra-headers-prefix", o.RequestHeader.ExtraHeaderPrefixes,
		"List of request header prefixes to inspect. X-Remote-Extra- is suggested.")
	fs.DurationVar(&o.AuthenticationTokenCacheTTL, "authentication-token-webhook-cache-ttl", o.AuthenticationTokenCacheTTL,
		"The duration to cache responses from the webhook token authenticator. (nephele: a rejected token is kept at most 1s, "+
			"so that a fresh token works almost at once.)")
	fs.BoolVar(&o.AuthenticationTolerateLookupFailure, "authentication-tolerate-lookup-failure", o.AuthenticationTolerateLookupFailure,
		"If true, failures to look up missing authentication configuration from the cluster are not considered fatal. "+
			"(nephele: default true, upstream false, so that a deployment without read access to kube-system/extension-apiserver-authentication "+
			"still starts, logging how to grant it; bearer tokens and the flags' CAs work either way.)")
	fs.DurationVar(&o.AuthorizationAllowCacheTTL, "authorization-webhook-cache-authorized-ttl", o.AuthorizationAllowCacheTTL,
		"The duration to cache 'authorized' responses from the webhook authorizer.")
	fs.DurationVar(&o.AuthorizationDenyCacheTTL, "authorization-webhook-cache-unauthorized-ttl", o.AuthorizationDenyCacheTTL,
		"The duration to cache 'unauthorized' responses from the webhook authorizer. (nephele: default 1s, upstream 10s, "+
			"so that a newly granted permission works almost at once.)")

	// Logging, beside --logging-format and -v.
	fs.StringVar(&o.VModule, "vmodule", o.VModule,
		"comma-separated list of pattern=N settings for file-filtered logging (only works for text log format)")
	fs.DurationVar(&o.LogFlushFrequency, "log-flush-frequency", o.LogFlushFrequency,
		"Maximum number of seconds between log flushes. (nephele: every line is written at once, so this only has to be positive.)")
	fs.BoolVar(&o.LogTextSplitStream, "log-text-split-stream", o.LogTextSplitStream,
		"[Alpha] In text format, write error messages to stderr and info messages to stdout. The default is to write a single stream. "+
			"Enable the LoggingAlphaOptions feature gate to use this.")
	fs.Var(&o.LogTextInfoBufferSize, "log-text-info-buffer-size",
		"[Alpha] In text format with split output streams, the info messages can be buffered for a while to increase performance. "+
			"(nephele: only 0, no buffering, is accepted: each line is written at once.)")
	fs.BoolVar(&o.LogJSONSplitStream, "log-json-split-stream", o.LogJSONSplitStream,
		"[Alpha] In JSON format, write error messages to stderr and info messages to stdout. The default is to write a single stream. "+
			"Enable the LoggingAlphaOptions feature gate to use this.")
	fs.Var(&o.LogJSONInfoBufferSize, "log-json-info-buffer-size",
		"[Alpha] In JSON format with split output streams, the info messages can be buffered for a while to increase performance. "+
			"(nephele: only 0, no buffering, is accepted: each line is written at once.)")

	// Cloud provider webhooks.
	w := &o.Webhooks
	fs.StringSliceVar(&w.Webhooks, "webhooks", w.Webhooks,
		"A list of webhooks to enable. '*' enables all on-by-default webhooks, 'foo' enables the webhook named 'foo', '-foo' disables the webhook named 'foo'. "+
			"(nephele: there are no cloud provider webhooks, so '*' and '-foo' enable nothing and naming one is refused.)")
	webhookServer := " (nephele: there are no cloud provider webhooks, so the webhook server never runs; accepted, as upstream's while --webhooks enables none.)"
	fs.StringVar(&w.BindAddress, "webhook-bind-address", w.BindAddress, "The IP address on which to listen for the --webhook-secure-port port."+webhookServer)
	fs.IntVar(&w.SecurePort, "webhook-secure-port", w.SecurePort, "Secure port to serve cloud provider webhooks. If 0, don't serve webhooks at all."+webhookServer)
	fs.StringVar(&w.CertDir, "webhook-cert-dir", w.CertDir, "The directory where the TLS certs of the webhook server are located."+webhookServer)
	fs.StringVar(&w.CertFile, "webhook-tls-cert-file", w.CertFile, "File containing the default x509 Certificate for HTTPS of the webhook server."+webhookServer)
	fs.StringVar(&w.KeyFile, "webhook-tls-private-key-file", w.KeyFile, "File containing the default x509 private key matching --webhook-tls-cert-file."+webhookServer)
	fs.StringVar(&w.MinVersion, "webhook-tls-min-version", w.MinVersion, "Minimum TLS version supported for the webhook server."+webhookServer)
	fs.StringSliceVar(&w.CipherSuites, "webhook-tls-cipher-suites", w.CipherSuites, "Comma-separated list of cipher suites for the webhook server."+webhookServer)
	fs.Int32SliceVar(&w.CurvePreferences, "webhook-tls-curve-preferences", w.CurvePreferences, "Comma-separated list of numeric Go crypto/tls CurveID values for the webhook server."+webhookServer)
	fs.Var(cliflag.NewNamedCertKeyArray(&w.SNICertKeys), "webhook-tls-sni-cert-key", "A pair of x509 certificate and private key file paths for the webhook server, optionally with domain patterns."+webhookServer)
	fs.BoolVar(&w.DisableHTTP2Serving, "webhook-disable-http2-serving", w.DisableHTTP2Serving, "If true, HTTP2 serving will be disabled for the webhook server."+webhookServer)

	fs.Var(&versionFlag{&o.Version}, "version",
		"--version, --version=raw prints version information and quits; --version=vX.Y.Z... sets the reported version. "+
			"(nephele: a version given is accepted and the binary's own is reported.)")
	fs.Lookup("version").NoOptDefVal = "true"
}

// servingConfig is the secure server's configuration from the serving, TLS and
// authentication flags (Complete has checked them); the caller adds the clients.
func (o *Options) servingConfig() (serving.Config, error) {
	cfg := serving.Config{
		BindAddress:                  o.BindAddress,
		Port:                         o.SecurePort,
		CertFile:                     o.TLSCertFile,
		KeyFile:                      o.TLSPrivateKeyFile,
		CertDir:                      o.CertDir,
		PairName:                     Component,
		CurvePreferences:             make([]tls.CurveID, 0, len(o.TLSCurvePreferences)),
		DisableHTTP2:                 o.DisableHTTP2Serving,
		HTTP2MaxStreamsPerConnection: o.HTTP2MaxStreamsPerConnection,
		PermitPortSharing:            o.PermitPortSharing,
		ClientCAFile:                 o.ClientCAFile,
		RequestHeader: serving.RequestHeaderConfig{
			ClientCAFile:        o.RequestHeader.ClientCAFile,
			AllowedNames:        o.RequestHeader.AllowedNames,
			UsernameHeaders:     o.RequestHeader.UsernameHeaders,
			UIDHeaders:          o.RequestHeader.UIDHeaders,
			GroupHeaders:        o.RequestHeader.GroupHeaders,
			ExtraHeaderPrefixes: o.RequestHeader.ExtraHeaderPrefixes,
		},
		AlwaysAllowPaths: o.AuthorizationAlwaysAllowPaths,
		EnableProfiling:  o.Profiling,
		TokenCacheTTL:    o.AuthenticationTokenCacheTTL,
		AllowedCacheTTL:  o.AuthorizationAllowCacheTTL,
		DeniedCacheTTL:   o.AuthorizationDenyCacheTTL,
	}
	if o.TLSMinVersion != "" {
		v, err := cliflag.TLSVersion(o.TLSMinVersion)
		if err != nil {
			return serving.Config{}, fmt.Errorf("invalid value for --tls-min-version: %w", err)
		}
		cfg.MinTLSVersion = v
	}
	suites, err := cliflag.TLSCipherSuites(o.TLSCipherSuites)
	if err != nil {
		return serving.Config{}, fmt.Errorf("invalid value for --tls-cipher-suites: %w", err)
	}
	cfg.CipherSuites = suites
	for _, c := range o.TLSCurvePreferences {
		cfg.CurvePreferences = append(cfg.CurvePreferences, tls.CurveID(c))
	}
	for _, nkc := range o.SNICertKeys {
		cfg.SNICertKeys = append(cfg.SNICertKeys, serving.SNICertKey{CertFile: nkc.CertFile, KeyFile: nkc.KeyFile, Names: nkc.Names})
	}
	return cfg, nil
}

// validateUpstream checks the flags addUpstreamFlags registers, one line per bad flag.
func (o *Options) validateUpstream(v *validator) {
	if o.featureGatesErr != nil {
		v.add("feature-gates", "the gates compiled into this binary clash: %s", o.featureGatesErr)
	}
	if o.ConcurrentNodeStatusUpdates < 0 {
		v.add("concurrent-node-status-updates", "%d: must be 0 (--concurrent-node-syncs) or more", o.ConcurrentNodeStatusUpdates)
	}
	if o.TLSMinVersion != "" {
		if _, err := cliflag.TLSVersion(o.TLSMinVersion); err != nil {
			v.add("tls-min-version", "%q: %s: possible values are %s", o.TLSMinVersion, err, strings.Join(cliflag.TLSPossibleVersions(), ", "))
		}
	}
	// With --tls-min-version=VersionTLS13 the suites are accepted and have no effect, as
	// upstream's: Go chooses the cipher suites of TLS 1.3 itself.
	if _, err := cliflag.TLSCipherSuites(o.TLSCipherSuites); err != nil {
		v.add("tls-cipher-suites", "%s: %s", strings.Join(o.TLSCipherSuites, ","), err)
	}
	for _, c := range o.TLSCurvePreferences {
		if c <= 0 || c > math.MaxUint16 {
			v.add("tls-curve-preferences", "%d: not a crypto/tls CurveID (for example %d for X25519, %d for P-256)", c, tls.X25519, tls.CurveP256)
		}
	}
	for _, nkc := range o.SNICertKeys {
		v.readable("tls-sni-cert-key", nkc.CertFile)
		v.readable("tls-sni-cert-key", nkc.KeyFile)
	}
	if o.HTTP2MaxStreamsPerConnection < 0 {
		v.add("http2-max-streams-per-connection", "%d: must be 0 (Go's default) or more", o.HTTP2MaxStreamsPerConnection)
	}

	v.readable("client-ca-file", o.ClientCAFile)
	v.readable("requestheader-client-ca-file", o.RequestHeader.ClientCAFile)
	if len(o.RequestHeader.UIDHeaders) > 0 && !o.FeatureGates.Enabled("RemoteRequestHeaderUID") {
		v.add("requestheader-uid-headers", "%s: requires the RemoteRequestHeaderUID feature gate, as upstream", strings.Join(o.RequestHeader.UIDHeaders, ","))
	}
	v.positive("authentication-token-webhook-cache-ttl", o.AuthenticationTokenCacheTTL)
	v.positive("authorization-webhook-cache-authorized-ttl", o.AuthorizationAllowCacheTTL)
	v.positive("authorization-webhook-cache-unauthorized-ttl", o.AuthorizationDenyCacheTTL)

	if o.VModule != "" {
		if _, err := parseVModule(o.VModule); err != nil {
			v.add("vmodule", "%q: %s", o.VModule, err)
		} else if o.LoggingFormat != LogFormatText {
			v.add("vmodule", "%q: only supported for text log format, as upstream", o.VModule)
		}
	}
	v.positive("log-flush-frequency", o.LogFlushFrequency)
	alpha := o.FeatureGates.Enabled(logsapi.LoggingAlphaOptions)
	for _, split := range []struct {
		flag string
		on   bool
	}{{"log-text-split-stream", o.LogTextSplitStream}, {"log-json-split-stream", o.LogJSONSplitStream}} {
		if split.on && !alpha {
			v.add(split.flag, "true: feature %s is disabled, as upstream requires it for this alpha option", logsapi.LoggingAlphaOptions)
		}
	}
	for _, buf := range []struct {
		flag string
		q    string
		zero bool
	}{
		{"log-text-info-buffer-size", o.LogTextInfoBufferSize.String(), o.LogTextInfoBufferSize.IsZero()},
		{"log-json-info-buffer-size", o.LogJSONInfoBufferSize.String(), o.LogJSONInfoBufferSize.IsZero()},
	} {
		if !buf.zero {
			v.add(buf.flag, "%s: nephele does not buffer log lines, it writes each at once so that none is lost when the process dies: leave it at 0", buf.q)
		}
	}

	for _, name := range o.Webhooks.Webhooks {
		if name != "*" && !strings.HasPrefix(name, "-") {
			v.add("webhooks", "%q: nephele has no cloud provider webhooks (upstream's alpha KEP-2699, which a provider fills with its own): "+
				"run the provider's admission webhook as a webhook server of its own, and leave --webhooks out", name)
		}
	}
}

// featureGateFlag is --feature-gates: the gate's own parsing, with an error for an unknown
// gate that names the known ones.
type featureGateFlag struct {
	gate featuregate.MutableVersionedFeatureGate
}

func (f *featureGateFlag) String() string {
	if s, ok := f.gate.(fmt.Stringer); ok {
		return s.String()
	}
	return ""
}
func (f *featureGateFlag) Type() string { return "mapStringBool" }

func (f *featureGateFlag) Set(value string) error {
	known := features.Known(f.gate)
	for _, kv := range strings.Split(value, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(kv), "=")
		if name == "" {
			continue
		}
		if name != "AllAlpha" && name != "AllBeta" && !slices.Contains(known, name) {
			return fmt.Errorf("unknown feature gate %q: known gates are AllAlpha, AllBeta, %s", name, strings.Join(known, ", "))
		}
	}
	return f.gate.Set(value)
}

// versionFlag is --version: true, raw, false, or a version to report.
type versionFlag struct{ v *string }

func (f *versionFlag) String() string { return *f.v }
func (f *versionFlag) Type() string   { return "version" }
func (f *versionFlag) IsBoolFlag() bool {
	return true
}

func (f *versionFlag) Set(value string) error {
	switch strings.ToLower(value) {
	case "true", "false", "raw":
		*f.v = strings.ToLower(value)
		return nil
	}
	if _, err := version.ParseSemantic(value); err != nil {
		return fmt.Errorf("%q: want true, false, raw, or a version such as v1.36.3 to report: %w", value, err)
	}
	*f.v = value
	return nil
}
