package local

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/pki"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfig(t *testing.T) {
	tokenFile := writeFile(t, "token", "  s3cret\n")
	emptyToken := writeFile(t, "empty", " \n")
	missing := filepath.Join(t.TempDir(), "missing")

	ca := testCA(t)
	caFile := writeFile(t, "ca.crt", string(ca))
	notPEM := writeFile(t, "not-pem", "a certificate\n")
	caData := "caData: |\n  " + strings.ReplaceAll(strings.TrimSpace(string(ca)), "\n", "\n  ") + "\n"
	withDefaults := func(endpoint string, ca []byte) Config {
		return Config{Endpoint: endpoint, Token: "x", CA: ca, RequestTimeout: DefaultRequestTimeout, ListPageSize: DefaultListPageSize, ProxyHealthzPort: cloud.KubeProxyHealthzPort, ProviderIDScheme: ProviderName}
	}

	tests := []struct {
		name string
		yaml string
		want Config
		// wantErr lists substrings the error must contain; empty means success.
		wantErr []string
	}{
		{
			name: "inline token, defaults",
			yaml: "endpoint: http://127.0.0.1:8990\ntoken: abc\n",
			want: Config{Endpoint: "http://127.0.0.1:8990", Token: "abc", RequestTimeout: DefaultRequestTimeout, ListPageSize: DefaultListPageSize, ProxyHealthzPort: cloud.KubeProxyHealthzPort, ProviderIDScheme: ProviderName},
		},
		{
			name: "token file, every field",
			yaml: "endpoint: https://cloud.example:443/base\ntokenFile: " + tokenFile + "\nrequestTimeout: 1.5s\nlistPageSize: 7\nproxyHealthzPort: 20256\n",
			want: Config{Endpoint: "https://cloud.example:443/base", Token: "s3cret", RequestTimeout: 1500 * time.Millisecond, ListPageSize: 7, ProxyHealthzPort: 20256, ProviderIDScheme: ProviderName, Files: []string{tokenFile}},
		},
		{
			name: "kube-proxy health checks off",
			yaml: "endpoint: http://a:1\ntoken: x\nproxyHealthzPort: -1\n",
			want: Config{Endpoint: "http://a:1", Token: "x", RequestTimeout: DefaultRequestTimeout, ListPageSize: DefaultListPageSize, ProxyHealthzPort: ProxyHealthzOff, ProviderIDScheme: ProviderName},
		},
		{name: "https with caFile", yaml: "endpoint: https://a:1\ntoken: x\ncaFile: " + caFile + "\n", want: func() Config {
			c := withDefaults("https://a:1", ca)
			c.Files = []string{caFile}
			return c
		}()},
		{name: "https with caData", yaml: "endpoint: https://a:1\ntoken: x\n" + caData, want: withDefaults("https://a:1", []byte(strings.TrimSpace(string(ca))+"\n"))},
		{name: "caFile and caData", yaml: "endpoint: https://a:1\ntoken: x\ncaFile: " + caFile + "\n" + caData, wantErr: []string{"caFile and caData: give at most one"}},
		{name: "CA for an http endpoint", yaml: "endpoint: http://a:1\ntoken: x\ncaFile: " + caFile + "\n", wantErr: []string{"only for an https endpoint"}},
		{name: "caFile missing", yaml: "endpoint: https://a:1\ntoken: x\ncaFile: " + missing + "\n", wantErr: []string{"caFile:", "no such file"}},
		{name: "caFile a device", yaml: "endpoint: https://a:1\ntoken: x\ncaFile: /dev/zero\n", wantErr: []string{"caFile:", "not a regular file"}},
		{name: "tokenFile a device", yaml: "endpoint: http://a:1\ntokenFile: /dev/zero\n", wantErr: []string{"tokenFile:", "not a regular file"}},
		{name: "caFile not PEM", yaml: "endpoint: https://a:1\ntoken: x\ncaFile: " + notPEM + "\n", wantErr: []string{"caFile:", "holds no PEM certificate"}},
		{name: "caData not PEM", yaml: "endpoint: https://a:1\ntoken: x\ncaData: hello\n", wantErr: []string{"caData: no PEM certificate"}},
		{name: "healthz port zero", yaml: "endpoint: http://a:1\ntoken: x\nproxyHealthzPort: 0\n", wantErr: []string{"proxyHealthzPort: 0: want 1-65535, or -1"}},
		{name: "healthz port too big", yaml: "endpoint: http://a:1\ntoken: x\nproxyHealthzPort: 70000\n", wantErr: []string{"proxyHealthzPort: 70000"}},
		{
			name: "a scheme of its own",
			yaml: "endpoint: http://a:1\ntoken: x\nproviderIDScheme: local-b\n",
			want: func() Config { c := withDefaults("http://a:1", nil); c.ProviderIDScheme = "local-b"; return c }(),
		},
		{name: "scheme not a DNS label", yaml: "endpoint: http://a:1\ntoken: x\nproviderIDScheme: Local_B\n", wantErr: []string{`providerIDScheme: "Local_B"`}},
		{name: "unknown field", yaml: "endpoint: http://a:1\ntoken: x\ntokenfile: y\n", wantErr: []string{`unknown field "tokenfile"`}},
		{name: "wrong type", yaml: "endpoint: [1]\ntoken: x\n", wantErr: []string{"endpoint"}},
		{name: "duplicate key", yaml: "endpoint: http://a:1\nendpoint: http://b:1\ntoken: x\n", wantErr: []string{"endpoint"}},
		{name: "not YAML", yaml: "endpoint: [\n", wantErr: []string{"not valid YAML"}},
		{name: "missing endpoint", yaml: "token: x\n", wantErr: []string{"endpoint: required"}},
		{name: "endpoint without scheme", yaml: "endpoint: 127.0.0.1:8990\ntoken: x\n", wantErr: []string{"endpoint:", "http://"}},
		{name: "endpoint without host", yaml: "endpoint: http://\ntoken: x\n", wantErr: []string{"endpoint:", "no host"}},
		{name: "endpoint with query", yaml: "endpoint: http://a:1/?x=1\ntoken: x\n", wantErr: []string{"endpoint:", "query"}},
		{name: "both tokens", yaml: "endpoint: http://a:1\ntoken: x\ntokenFile: " + tokenFile + "\n", wantErr: []string{"token and tokenFile", "exactly one"}},
		{name: "no token", yaml: "endpoint: http://a:1\n", wantErr: []string{"token or tokenFile: one is required"}},
		{name: "blank token", yaml: "endpoint: http://a:1\ntoken: '  '\n", wantErr: []string{"token: only white space"}},
		{name: "missing token file", yaml: "endpoint: http://a:1\ntokenFile: " + missing + "\n", wantErr: []string{"tokenFile:", "no such file"}},
		{name: "empty token file", yaml: "endpoint: http://a:1\ntokenFile: " + emptyToken + "\n", wantErr: []string{"tokenFile:", "is empty"}},
		{name: "bad timeout", yaml: "endpoint: http://a:1\ntoken: x\nrequestTimeout: soon\n", wantErr: []string{`requestTimeout: "soon" is not a duration`}},
		{name: "numeric timeout", yaml: "endpoint: http://a:1\ntoken: x\nrequestTimeout: 5\n", wantErr: []string{"requestTimeout"}},
		{name: "negative timeout", yaml: "endpoint: http://a:1\ntoken: x\nrequestTimeout: -1s\n", wantErr: []string{"requestTimeout: -1s: must be positive"}},
		{name: "page size too big", yaml: "endpoint: http://a:1\ntoken: x\nlistPageSize: 1001\n", wantErr: []string{"listPageSize: 1001"}},
		{name: "page size zero", yaml: "endpoint: http://a:1\ntoken: x\nlistPageSize: 0\n", wantErr: []string{"listPageSize: 0"}},
		{name: "every problem at once", yaml: "requestTimeout: x\nlistPageSize: -1\n", wantErr: []string{"endpoint: required", "token or tokenFile", "requestTimeout", "listPageSize"}},
		{name: "empty file", yaml: "\n  \n", wantErr: []string{"empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadConfig(strings.NewReader(tt.yaml))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("LoadConfig succeeded with %+v, want an error containing %q", got, tt.wantErr)
				}
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Errorf("error %v is a %T, want a *ConfigError", err, err)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("LoadConfig = %+v, want %+v", *got, tt.want)
			}
		})
	}
}

func TestLoadConfigNil(t *testing.T) {
	_, err := LoadConfig(nil)
	if err == nil || !strings.Contains(err.Error(), "no --cloud-config") {
		t.Fatalf("LoadConfig(nil) = %v, want an error asking for --cloud-config", err)
	}
}

func TestRegister(t *testing.T) {
	r := cloud.NewRegistry()
	if err := Register(r); err != nil {
		t.Fatalf("Register: %v", err)
	}
	if err := Register(r); err == nil {
		t.Error("a second Register into the same registry succeeded, want a duplicate error")
	}
	if names := r.Names(); len(names) != 1 || names[0] != ProviderName {
		t.Errorf("registry names = %v, want [%s]", names, ProviderName)
	}
	p, err := r.New(ProviderName, strings.NewReader("endpoint: http://127.0.0.1:1\ntoken: x\n"))
	if err != nil {
		t.Fatalf("registry.New: %v", err)
	}
	if p.ProviderName() != ProviderName {
		t.Errorf("ProviderName() = %q, want %q", p.ProviderName(), ProviderName)
	}
	for name, ok := range map[string]bool{
		"Instances":      second(p.Instances()),
		"InstanceLister": second(p.InstanceLister()),
		"LoadBalancers":  second(p.LoadBalancers()),
		"Routes":         second(p.Routes()),
	} {
		if !ok {
			t.Errorf("capability %s is missing", name)
		}
	}
	if _, err := r.New(ProviderName, nil); err == nil || !strings.Contains(err.Error(), "--cloud-config") {
		t.Errorf("registry.New without a config = %v, want an error asking for --cloud-config", err)
	}
}

func second[T any](_ T, ok bool) bool { return ok }

func TestNewFromConfig(t *testing.T) {
	if _, err := NewFromConfig(Config{Token: "x"}); err == nil {
		t.Error("NewFromConfig without an endpoint succeeded")
	}
	if _, err := NewFromConfig(Config{Endpoint: "http://a:1"}); err == nil {
		t.Error("NewFromConfig without a token succeeded")
	}
	if _, err := NewFromConfig(Config{Endpoint: "http://a:1", Token: "x", ListPageSize: 5000}); err == nil {
		t.Error("NewFromConfig with page size 5000 succeeded")
	}
	p, err := NewFromConfig(Config{Endpoint: "http://a:1", Token: "x"})
	if err != nil {
		t.Fatalf("NewFromConfig: %v", err)
	}
	if p.pageSize != DefaultListPageSize {
		t.Errorf("page size %d, want the default %d", p.pageSize, DefaultListPageSize)
	}
	if got := p.Config().ProxyHealthzPort; got != cloud.KubeProxyHealthzPort {
		t.Errorf("kube-proxy healthz port %d, want the default %d", got, cloud.KubeProxyHealthzPort)
	}
	if got := p.ProviderPlatforms(); !reflect.DeepEqual(got, []string{ProviderName}) {
		t.Errorf("platforms %q, want [%s]", got, ProviderName)
	}
	if _, err := NewFromConfig(Config{Endpoint: "http://a:1", Token: "x", ProviderIDScheme: "b://"}); err == nil {
		t.Error("NewFromConfig with provider ID scheme b:// succeeded")
	}
	if _, err := NewFromConfig(Config{Endpoint: "http://a:1", Token: "x", ProxyHealthzPort: -2}); err == nil {
		t.Error("NewFromConfig with kube-proxy healthz port -2 succeeded")
	}
}

func TestFileMarshalRoundTrips(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pages := 7
	var healthz int64 = 20256
	for _, f := range []File{
		{Endpoint: "http://10.88.0.1:8990", TokenFile: tokenFile},
		{Endpoint: "https://127.0.0.1:443", Token: "inline", RequestTimeout: "5s", ListPageSize: &pages, ProxyHealthzPort: &healthz},
	} {
		raw, err := f.Marshal("a test")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(raw), "# The local provider's --cloud-config, written by a test.\n") {
			t.Errorf("Marshal() = %q, want it to say who wrote it", raw)
		}
		cfg, err := LoadConfig(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("LoadConfig(Marshal(%+v)): %v\n%s", f, err, raw)
		}
		want := f.Token
		if want == "" {
			want = "from-file"
		}
		if cfg.Endpoint != f.Endpoint || cfg.Token != want {
			t.Errorf("round trip of %+v: %+v", f, cfg)
		}
		if f.ListPageSize != nil && (cfg.ListPageSize != pages || cfg.RequestTimeout != 5*time.Second || cfg.ProxyHealthzPort != int32(healthz)) {
			t.Errorf("round trip of %+v: %+v", f, cfg)
		}
	}
}

// testCA returns a CA certificate, PEM-encoded.
func testCA(t *testing.T) []byte {
	t.Helper()
	ca, err := pki.NewAuthority("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca.PEM()
}
