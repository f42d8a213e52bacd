package manager

import (
	"bytes"
	"crypto/tls"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/nephele-dev/nephele/manager/serving"
)

// parseUpstream parses args with every flag of o and returns the parse error.
func parseUpstream(t *testing.T, o *Options, args ...string) error {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	o.AddFlags(fs)
	return fs.Parse(args)
}

func TestUpstreamFlagsReachTheServer(t *testing.T) {
	f := newTestFiles(t)
	o := validOptions()
	err := parseUpstream(t, o,
		"--tls-min-version=VersionTLS13",
		"--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
		"--tls-curve-preferences=29,23",
		"--tls-sni-cert-key="+f.cert+","+f.key+":foo.example.com",
		"--cert-dir="+f.dir,
		"--disable-http2-serving",
		"--http2-max-streams-per-connection=50",
		"--permit-port-sharing",
		"--client-ca-file="+f.cert,
		"--requestheader-client-ca-file="+f.cert,
		"--requestheader-allowed-names=front-proxy",
		"--requestheader-username-headers=X-Remote-User",
		"--authentication-token-webhook-cache-ttl=30s",
		"--authorization-webhook-cache-authorized-ttl=20s",
		"--authorization-webhook-cache-unauthorized-ttl=2s",
		"--concurrent-node-status-updates=3",
	)
	if err != nil {
		t.Fatalf("parsing upstream's flags: %v", err)
	}
	cfg, err := o.Complete(testSpecs())
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if cfg.Controllers().ConcurrentNodeStatusUpdates != 3 {
		t.Errorf("ConcurrentNodeStatusUpdates = %d, want 3", cfg.Controllers().ConcurrentNodeStatusUpdates)
	}
	sc, err := o.servingConfig()
	if err != nil {
		t.Fatal(err)
	}
	want := serving.Config{
		BindAddress: o.BindAddress, Port: o.SecurePort,
		CertDir: f.dir, PairName: Component,
		SNICertKeys:      []serving.SNICertKey{{CertFile: f.cert, KeyFile: f.key, Names: []string{"foo.example.com"}}},
		MinTLSVersion:    tls.VersionTLS13,
		CipherSuites:     []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256},
		DisableHTTP2:     true, HTTP2MaxStreamsPerConnection: 50, PermitPortSharing: true,
		ClientCAFile: f.cert,
		RequestHeader: serving.RequestHeaderConfig{
			ClientCAFile: f.cert, AllowedNames: []string{"front-proxy"}, UsernameHeaders: []string{"X-Remote-User"},
			GroupHeaders: []string{"x-remote-group"}, ExtraHeaderPrefixes: []string{"x-remote-extra-"},
		},
		AlwaysAllowPaths: o.AuthorizationAlwaysAllowPaths, EnableProfiling: o.Profiling,
		TokenCacheTTL: 30e9, AllowedCacheTTL: 20e9, DeniedCacheTTL: 2e9,
	}
	if !reflect.DeepEqual(sc, want) {
		t.Errorf("servingConfig =\n%+v\nwant\n%+v", sc, want)
	}
}

func TestUpstreamFlagErrors(t *testing.T) {
	f := newTestFiles(t)
	tests := []struct {
		name string
		args []string
		want string // a prefix of the one line Complete returns
	}{
		{"tls version", []string{"--tls-min-version=TLS9"}, `invalid value for --tls-min-version: "TLS9"`},
		{"cipher suite", []string{"--tls-cipher-suites=NOPE"}, "invalid value for --tls-cipher-suites: NOPE"},
		{"curve", []string{"--tls-curve-preferences=70000"}, "invalid value for --tls-curve-preferences: 70000"},
		{"client CA missing", []string{"--client-ca-file=" + f.dir + "/missing"}, "invalid value for --client-ca-file"},
		{"uid headers without the gate", []string{"--feature-gates=RemoteRequestHeaderUID=false", "--requestheader-uid-headers=X-Remote-Uid"}, "invalid value for --requestheader-uid-headers: X-Remote-Uid: requires the RemoteRequestHeaderUID feature gate"},
		{"negative status workers", []string{"--concurrent-node-status-updates=-1"}, "invalid value for --concurrent-node-status-updates: -1"},
		{"vmodule syntax", []string{"--vmodule=foo"}, `invalid value for --vmodule: "foo"`},
		{"vmodule with json", []string{"--vmodule=foo=2", "--logging-format=json"}, `invalid value for --vmodule: "foo=2": only supported for text log format`},
		{"split stream without the gate", []string{"--log-text-split-stream"}, "invalid value for --log-text-split-stream: true: feature LoggingAlphaOptions is disabled"},
		{"log buffer", []string{"--log-text-info-buffer-size=1Mi"}, "invalid value for --log-text-info-buffer-size: 1Mi: nephele does not buffer log lines"},
		{"a webhook", []string{"--webhooks=aws-pod-identity"}, `invalid value for --webhooks: "aws-pod-identity": nephele has no cloud provider webhooks`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validOptions()
			if err := parseUpstream(t, o, tt.args...); err != nil {
				t.Fatalf("parse: %v", err)
			}
			_, err := o.Complete(testSpecs())
			if err == nil {
				t.Fatal("Complete succeeded")
			}
			if lines := strings.Split(err.Error(), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], tt.want) {
				t.Errorf("Complete =\n  %s\nwant one line starting\n  %s", err, tt.want)
			}
		})
	}
}

func TestAcceptedUpstreamFlags(t *testing.T) {
	// Flags accepted with upstream's meaning where nephele has nothing to change.
	o := validOptions()
	if err := parseUpstream(t, o,
		"--webhooks=*,-foo", "--webhook-secure-port=0", "--external-cloud-volume-plugin=aws",
		"--contention-profiling", "--log-flush-frequency=10s", "--vmodule=controller=4",
		"--feature-gates=LoggingAlphaOptions=true,CloudControllerManagerWebhook=false",
		"--log-text-split-stream",
	); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Complete(testSpecs()); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if !o.FeatureGates.Enabled("LoggingAlphaOptions") {
		t.Error("--feature-gates=LoggingAlphaOptions=true did not enable it")
	}
}

func TestFeatureGateErrors(t *testing.T) {
	o := NewOptions()
	err := parseUpstream(t, o, "--feature-gates=NoSuchGate=true")
	if err == nil {
		t.Fatal("an unknown gate was accepted")
	}
	msg := flagError(err).Error()
	for _, want := range []string{"invalid value for --feature-gates", `"NoSuchGate=true"`, `unknown feature gate "NoSuchGate"`, "known gates are AllAlpha, AllBeta,", "LoggingAlphaOptions"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	// Two managers in one process never share a gate.
	a, b := NewOptions(), NewOptions()
	if err := a.FeatureGates.Set("LoggingAlphaOptions=true"); err != nil {
		t.Fatal(err)
	}
	if b.FeatureGates.Enabled("LoggingAlphaOptions") {
		t.Error("setting one Options' gate changed another's")
	}
}

func TestFlagErrorNamesTheFlag(t *testing.T) {
	o := NewOptions()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--no-such-flag=1"}, "unknown flag --no-such-flag: neither upstream's cloud-controller-manager (1.36) nor nephele has it"},
		{[]string{"-Z"}, "unknown shorthand flag 'Z' in -Z: neither upstream's cloud-controller-manager nor nephele has it"},
		{[]string{"--concurrent-node-syncs=many"}, `invalid value for --concurrent-node-syncs: "many":`},
	}
	for _, tt := range tests {
		err := parseUpstream(t, o, tt.args...)
		if err == nil {
			t.Fatalf("%v parsed", tt.args)
		}
		if got := flagError(err).Error(); !strings.HasPrefix(got, tt.want) {
			t.Errorf("%v: %q, want it to start %q", tt.args, got, tt.want)
		}
	}
	plain := errors.New("something else")
	if flagError(plain) != plain {
		t.Error("an error that is not pflag's was rewritten")
	}
}

func TestVersionFlag(t *testing.T) {
	for _, tt := range []struct {
		arg, want string
		printed   bool
	}{
		{"--version", "Kubernetes ", true},
		{"--version=raw", "version.Info{", true},
		{"--version=false", "", false},
	} {
		o := NewOptions()
		if err := parseUpstream(t, o, tt.arg); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if printed := printVersion(&out, o.Version); printed != tt.printed || !strings.HasPrefix(out.String(), tt.want) {
			t.Errorf("%s: printed %t %q, want %t %q", tt.arg, printed, out.String(), tt.printed, tt.want)
		}
	}
	if err := parseUpstream(t, NewOptions(), "--version=banana"); err == nil {
		t.Error("--version=banana parsed")
	}
}

func TestVModuleRaisesOneFile(t *testing.T) {
	var out bytes.Buffer
	// This test's file is options_upstream_test.go: raise it alone to 4.
	log, err := NewLoggerWithOptions(LoggerOptions{Out: &out, Verbosity: 0, VModule: "other=9,options_upstream_test=4"})
	if err != nil {
		t.Fatal(err)
	}
	log.V(4).Info("raised")
	log.V(5).Info("above the file's level")
	if got := out.String(); !strings.Contains(got, "raised") || strings.Contains(got, "above") {
		t.Errorf("logged %q, want only the V(4) line", got)
	}
	out.Reset()
	log, err = NewLoggerWithOptions(LoggerOptions{Out: &out, VModule: "other=9"})
	if err != nil {
		t.Fatal(err)
	}
	log.V(1).Info("not raised")
	if out.Len() != 0 {
		t.Errorf("a file no pattern matches logged V(1): %q", out.String())
	}
}

func TestSplitStream(t *testing.T) {
	var info, errs bytes.Buffer
	log, err := NewLoggerWithOptions(LoggerOptions{Out: &info, ErrOut: &errs})
	if err != nil {
		t.Fatal(err)
	}
	log.Info("fine")
	log.Error(errors.New("boom"), "broken")
	if !strings.Contains(info.String(), "fine") || strings.Contains(info.String(), "broken") || !strings.Contains(errs.String(), "broken") {
		t.Errorf("info stream %q, error stream %q", info.String(), errs.String())
	}
}
