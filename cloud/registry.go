package cloud

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
)

// Factory builds a provider from its cloud config. config is nil when no
// --cloud-config was given.
type Factory func(config io.Reader) (Provider, error)

// Registry maps provider names to factories. It is an ordinary value: a binary builds
// one in main and tests build their own, so nothing global needs resetting. The zero
// value is an empty registry ready to use.
type Registry struct {
	mu        sync.RWMutex
	factories map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{factories: map[string]Factory{}}
}

// Register adds a factory under name. It fails on an empty or duplicate name or a nil
// factory.
func (r *Registry) Register(name string, f Factory) error {
	if name == "" {
		return fmt.Errorf("registering a cloud provider: name is empty")
	}
	if f == nil {
		return fmt.Errorf("registering cloud provider %q: factory is nil", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.factories == nil {
		r.factories = map[string]Factory{}
	}
	if _, dup := r.factories[name]; dup {
		return fmt.Errorf("registering cloud provider %q: a provider with that name is already registered", name)
	}
	r.factories[name] = f
	return nil
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New builds the provider registered under name.
func (r *Registry) New(name string, config io.Reader) (Provider, error) {
	r.mu.RLock()
	f, ok := r.factories[name]
	r.mu.RUnlock()
	if !ok {
		known := r.Names()
		if len(known) == 0 {
			return nil, fmt.Errorf("unknown cloud provider %q: no providers are compiled into this binary", name)
		}
		return nil, fmt.Errorf("unknown cloud provider %q: known providers are %s", name, strings.Join(known, ", "))
	}
	p, err := f(config)
	if err != nil {
		return nil, fmt.Errorf("creating cloud provider %q: %w", name, err)
	}
	if p == nil {
		return nil, fmt.Errorf("creating cloud provider %q: factory returned no provider", name)
	}
	return p, nil
}
