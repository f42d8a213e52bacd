package cloud

import (
	"fmt"
	"strings"
	"unicode"
)

// ProviderID identifies an instance across Kubernetes and the cloud. Its string form,
// stored in a Node's spec.providerID, is "<provider>://<id>".
type ProviderID struct {
	// Provider is the provider's name, the scheme of the string form.
	Provider string
	// ID is the cloud's identifier for the instance. It may contain slashes.
	ID string
}

// String returns the "<provider>://<id>" form.
func (p ProviderID) String() string { return p.Provider + "://" + p.ID }

// NewProviderID returns the ProviderID for provider and id, checking both parts.
func NewProviderID(provider, id string) (ProviderID, error) {
	p := ProviderID{Provider: provider, ID: id}
	if err := p.validate(); err != nil {
		return ProviderID{}, err
	}
	return p, nil
}

// ParseProviderID parses "<provider>://<id>". It returns an error, never panics, on
// malformed input.
func ParseProviderID(s string) (ProviderID, error) {
	provider, id, ok := strings.Cut(s, "://")
	if !ok {
		return ProviderID{}, fmt.Errorf("provider ID %q: want the form <provider>://<id>", s)
	}
	p := ProviderID{Provider: provider, ID: id}
	if err := p.validate(); err != nil {
		return ProviderID{}, fmt.Errorf("provider ID %q: %w", s, err)
	}
	return p, nil
}

func (p ProviderID) validate() error {
	if p.Provider == "" {
		return fmt.Errorf("provider name is empty")
	}
	for _, r := range p.Provider {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '+') {
			return fmt.Errorf("provider name %q: only lower-case letters, digits, '-', '.' and '+' are allowed", p.Provider)
		}
	}
	if strings.TrimLeft(p.ID, "/") == "" {
		return fmt.Errorf("instance ID is empty")
	}
	// A Node's spec.providerID is compared byte for byte and shown in logs and
	// labels, so an ID with white space or control characters is always a mistake.
	if strings.IndexFunc(p.ID, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return fmt.Errorf("instance ID %q contains white space or control characters", p.ID)
	}
	return nil
}
