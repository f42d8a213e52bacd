package cloud

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// namedProvider is the smallest Provider: a name and no capabilities.
type namedProvider struct{ name string }

func (p namedProvider) ProviderName() string                 { return p.name }
func (namedProvider) Instances() (Instances, bool)           { return nil, false }
func (namedProvider) InstanceLister() (InstanceLister, bool) { return nil, false }
func (namedProvider) LoadBalancers() (LoadBalancers, bool)   { return nil, false }
func (namedProvider) Routes() (Routes, bool)                 { return nil, false }

// factoryFor returns a factory that builds a namedProvider and remembers the config
// it was given.
func factoryFor(name string, gotConfig *string) Factory {
	return func(config io.Reader) (Provider, error) {
		if config != nil && gotConfig != nil {
			b, err := io.ReadAll(config)
			if err != nil {
				return nil, err
			}
			*gotConfig = string(b)
		}
		return namedProvider{name: name}, nil
	}
}

func TestRegistryRegister(t *testing.T) {
	tests := []struct {
		name     string
		existing []string
		register string
		factory  Factory
		wantErr  string
	}{
		{name: "first", register: "local", factory: factoryFor("local", nil)},
		{name: "second name", existing: []string{"local"}, register: "aws", factory: factoryFor("aws", nil)},
		{name: "duplicate", existing: []string{"local"}, register: "local", factory: factoryFor("local", nil), wantErr: "already registered"},
		{name: "empty name", register: "", factory: factoryFor("x", nil), wantErr: "name is empty"},
		{name: "nil factory", register: "local", factory: nil, wantErr: "factory is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry()
			for _, n := range tt.existing {
				if err := r.Register(n, factoryFor(n, nil)); err != nil {
					t.Fatalf("Register(%q): %v", n, err)
				}
			}
			err := r.Register(tt.register, tt.factory)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Register(%q) error = %v, want one containing %q", tt.register, err, tt.wantErr)
				}
				if got, want := len(r.Names()), len(tt.existing); got != want {
					t.Errorf("after a failed Register there are %d names, want %d", got, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Register(%q): %v", tt.register, err)
			}
		})
	}
}

func TestRegistryNew(t *testing.T) {
	factoryErr := errors.New("bad cloud config")
	var gotConfig string
	r := NewRegistry()
	for name, f := range map[string]Factory{
		"local":  factoryFor("local", &gotConfig),
		"broken": func(io.Reader) (Provider, error) { return nil, factoryErr },
		"empty":  func(io.Reader) (Provider, error) { return nil, nil },
		"aws":    factoryFor("aws", nil),
	} {
		if err := r.Register(name, f); err != nil {
			t.Fatalf("Register(%q): %v", name, err)
		}
	}
	if got, want := strings.Join(r.Names(), ","), "aws,broken,empty,local"; got != want {
		t.Errorf("Names() = %s, want %s (sorted)", got, want)
	}

	tests := []struct {
		name    string
		config  io.Reader
		wantErr []string
		wantIs  error
	}{
		{name: "local", config: strings.NewReader("zone: a")},
		{name: "aws", config: nil},
		{name: "gce", wantErr: []string{`unknown cloud provider "gce"`, "aws, broken, empty, local"}},
		{name: "broken", wantErr: []string{`creating cloud provider "broken"`, "bad cloud config"}, wantIs: factoryErr},
		{name: "empty", wantErr: []string{"factory returned no provider"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := r.New(tt.name, tt.config)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("New(%q) = %v, want an error", tt.name, p)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("New(%q) error = %q, want it to contain %q", tt.name, err, w)
					}
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("New(%q) error does not wrap the factory's error", tt.name)
				}
				if p != nil {
					t.Errorf("New(%q) returned a provider with an error", tt.name)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%q): %v", tt.name, err)
			}
			if p.ProviderName() != tt.name {
				t.Errorf("New(%q).ProviderName() = %q", tt.name, p.ProviderName())
			}
		})
	}
	if gotConfig != "zone: a" {
		t.Errorf("the factory read config %q, want %q", gotConfig, "zone: a")
	}
}

func TestRegistryEmptySaysSo(t *testing.T) {
	_, err := NewRegistry().New("local", nil)
	if err == nil || !strings.Contains(err.Error(), "no providers are compiled into this binary") {
		t.Fatalf("New on an empty registry: error = %v", err)
	}
}

func TestRegistriesAreIndependent(t *testing.T) {
	a, b := NewRegistry(), NewRegistry()
	if err := a.Register("local", factoryFor("local", nil)); err != nil {
		t.Fatal(err)
	}
	if err := b.Register("local", factoryFor("local", nil)); err != nil {
		t.Fatalf("registering the same name in a second registry: %v", err)
	}
	if err := b.Register("aws", factoryFor("aws", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.New("aws", nil); err == nil {
		t.Error(`registry a builds "aws", which was registered only in b`)
	}
	if got := a.Names(); len(got) != 1 || got[0] != "local" {
		t.Errorf("a.Names() = %v, want [local]", got)
	}
}

func TestRegistryZeroValue(t *testing.T) {
	var r Registry
	if _, err := r.New("local", nil); err == nil {
		t.Error("New on a zero Registry succeeded")
	}
	if err := r.Register("local", factoryFor("local", nil)); err != nil {
		t.Fatalf("Register on a zero Registry: %v", err)
	}
	if _, err := r.New("local", nil); err != nil {
		t.Fatalf("New after Register on a zero Registry: %v", err)
	}
}
