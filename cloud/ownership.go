package cloud

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Node ownership (KEP-5778, "hybrid-cloud support: explicit node ownership", provisional):
// in a cluster whose nodes come from several clouds, or from a cloud and machines no
// cloud manages, each CCM acts only on the nodes its provider owns. docs/hybrid.md says
// how nephele decides and where it departs from the KEP's draft.

// Platform labels a node registers with to declare which platform (provider-ID scheme)
// owns it before it has a provider ID. LabelPlatform is the key KEP-5778's draft
// proposes; LabelNodePlatform is the same declaration under node.kubernetes.io, the
// namespace kubelet's --node-labels and the NodeRestriction admission plugin let a
// kubelet set on itself (they refuse topology.kubernetes.io/platform). Either declares;
// both, with different values, declare nothing and the node is nobody's.
const (
	LabelPlatform     = "topology.kubernetes.io/platform"
	LabelNodePlatform = "node.kubernetes.io/platform"
)

// AllPlatforms in NodeOwnership.Platforms (--cloud-provider-platforms=*) owns every
// node whatever its provider ID: upstream's behaviour, for a cluster of one cloud whose
// provider IDs do not carry the provider's name as their scheme.
const AllPlatforms = "*"

// PlatformLister is implemented by a provider whose instances carry more than one
// provider-ID scheme (KEP-5778's ProviderPlatforms; Hetzner's hcloud:// and hrobot://
// are its example). Without it a provider's one platform is its ProviderName.
type PlatformLister interface {
	// ProviderPlatforms returns the provider-ID schemes of the provider's instances.
	ProviderPlatforms() []string
}

// Platforms returns the provider-ID schemes p's instances carry: its
// ProviderPlatforms when it lists them, else its ProviderName.
func Platforms(p Provider) []string {
	if pl, ok := p.(PlatformLister); ok {
		if list := pl.ProviderPlatforms(); len(list) > 0 {
			return slices.Clone(list)
		}
	}
	return []string{p.ProviderName()}
}

// UndeclaredPolicy says what a CCM does with a node that has neither a provider ID nor
// a platform label (--undeclared-nodes).
type UndeclaredPolicy string

const (
	// UndeclaredAdopt treats such a node as the CCM's own, as every CCM does today: a
	// cluster of one cloud, whose kubelets declare nothing, keeps working. Once its
	// provider ID is set, the scheme decides.
	UndeclaredAdopt UndeclaredPolicy = "adopt"
	// UndeclaredIgnore leaves such a node alone: the setting for a hybrid cluster,
	// where a node must declare its platform to be initialized by any CCM.
	UndeclaredIgnore UndeclaredPolicy = "ignore"
)

// NodeOwnership decides which nodes a CCM acts on. The zero value owns every node
// (no platforms means every platform, as in KEP-5778), so code that never configures
// it behaves as before.
type NodeOwnership struct {
	// Platforms are the provider-ID schemes the CCM's provider owns; empty or
	// containing AllPlatforms means every node.
	Platforms []string
	// Undeclared decides the nodes with neither a provider ID nor a platform label;
	// empty means UndeclaredAdopt.
	Undeclared UndeclaredPolicy
}

// Ownership reasons: the reason label of nephele_node_ownership_skipped_total and the
// start of a NotOwned Event's message.
const (
	OwnedByProviderID      = "provider_id"
	OwnedByDeclaration     = "declared"
	OwnedUndeclared        = "undeclared_adopted"
	OwnedAll               = "all_platforms"
	NotOwnedSchemeMismatch = "scheme_mismatch"
	NotOwnedBadProviderID  = "bad_provider_id"
	NotOwnedDeclared       = "declared_elsewhere"
	NotOwnedConflict       = "conflicting_declarations"
	NotOwnedUndeclared     = "undeclared"
)

// Verdict is NodeOwnership's decision on one node.
type Verdict struct {
	// Owned is whether the CCM may act on the node.
	Owned bool
	// Reason is one of the Owned* and NotOwned* constants.
	Reason string
	// Detail says, for a person, what decided it.
	Detail string
}

// Validate checks the configuration; its error names the value and what is allowed.
func (o NodeOwnership) Validate() error {
	for _, p := range o.Platforms {
		if p == AllPlatforms {
			continue
		}
		if _, err := NewProviderID(p, "x"); err != nil {
			return fmt.Errorf("platform %q: %w: each is a provider-ID scheme, or %s for every node", p, err, AllPlatforms)
		}
	}
	switch o.Undeclared {
	case "", UndeclaredAdopt, UndeclaredIgnore:
		return nil
	}
	return fmt.Errorf("%q: must be %s or %s", o.Undeclared, UndeclaredAdopt, UndeclaredIgnore)
}

// all reports whether the configuration owns every node.
func (o NodeOwnership) all() bool {
	return len(o.Platforms) == 0 || slices.Contains(o.Platforms, AllPlatforms)
}

// Decide says whether the CCM owns node. The provider ID decides once set (it is
// immutable, and its scheme names the platform); before that the platform label; a node
// with neither follows Undeclared.
func (o NodeOwnership) Decide(node *corev1.Node) Verdict {
	if o.all() {
		return Verdict{Owned: true, Reason: OwnedAll, Detail: "this CCM owns every node"}
	}
	if id := node.Spec.ProviderID; id != "" {
		pid, err := ParseProviderID(id)
		switch {
		case err != nil:
			return Verdict{Reason: NotOwnedBadProviderID, Detail: fmt.Sprintf("its spec.providerID is not <scheme>://<id>: %v", err)}
		case slices.Contains(o.Platforms, pid.Provider):
			return Verdict{Owned: true, Reason: OwnedByProviderID, Detail: "its provider ID's scheme is " + pid.Provider}
		}
		return Verdict{Reason: NotOwnedSchemeMismatch, Detail: fmt.Sprintf("its provider ID's scheme %q is not one of this CCM's platforms (%s)", pid.Provider, strings.Join(o.Platforms, ", "))}
	}
	declared, conflict := declaredPlatform(node)
	switch {
	case conflict:
		return Verdict{Reason: NotOwnedConflict, Detail: fmt.Sprintf("its labels %s=%q and %s=%q declare different platforms",
			LabelPlatform, node.Labels[LabelPlatform], LabelNodePlatform, node.Labels[LabelNodePlatform])}
	case declared != "" && slices.Contains(o.Platforms, declared):
		return Verdict{Owned: true, Reason: OwnedByDeclaration, Detail: "it declares platform " + declared}
	case declared != "":
		return Verdict{Reason: NotOwnedDeclared, Detail: fmt.Sprintf("it declares platform %q, not one of this CCM's (%s)", declared, strings.Join(o.Platforms, ", "))}
	case o.Undeclared == UndeclaredIgnore:
		return Verdict{Reason: NotOwnedUndeclared, Detail: fmt.Sprintf("it has no provider ID and no %s label, and undeclared nodes are ignored (--undeclared-nodes=ignore)", LabelNodePlatform)}
	}
	return Verdict{Owned: true, Reason: OwnedUndeclared, Detail: "it declares no platform and undeclared nodes are adopted"}
}

// declaredPlatform returns the platform node's labels declare, and whether the two
// keys disagree.
func declaredPlatform(node *corev1.Node) (string, bool) {
	a, b := node.Labels[LabelPlatform], node.Labels[LabelNodePlatform]
	switch {
	case a != "" && b != "" && a != b:
		return "", true
	case a != "":
		return a, false
	}
	return b, false
}
