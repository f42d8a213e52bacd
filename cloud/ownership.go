package cloud

import (
	"cmp"
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
	// Siblings are the ownerships of the other clouds one manager serves
	// (--clouds-config). A node a sibling owns is not this cloud's, and is left alone
	// here like any other, but OwnedBySibling says so: the manager does own it, so
	// nobody needs telling.
	Siblings []NodeOwnership
	// Quiet, for one of several clouds (Siblings), leaves the NotOwned Events of nodes
	// no cloud of the manager owns to the one cloud that is not quiet (the default), so
	// such a node is told once per controller, naming every cloud's platforms.
	Quiet bool
}

// OwnedBySibling reports whether one of o's Siblings owns node.
func (o NodeOwnership) OwnedBySibling(node *corev1.Node) bool {
	for _, s := range o.Siblings {
		if s.Decide(node).Owned {
			return true
		}
	}
	return false
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

// Verdict is NodeOwnership's decision on one node. Deciding allocates nothing; Detail
// builds the explanation only when it is shown.
type Verdict struct {
	// Owned is whether the CCM may act on the node.
	Owned bool
	// Reason is one of the Owned* and NotOwned* constants.
	Reason string

	platforms []string
	// siblings are the ownerships of the manager's other clouds, whose platforms the
	// explanation names too.
	siblings []NodeOwnership
	// value is what decided: the provider ID's scheme or the declared platform; for
	// NotOwnedBadProviderID and NotOwnedConflict the offending values.
	value, other string
}

// Detail says, for a person, what decided the verdict.
func (v Verdict) Detail() string {
	all := v.platforms
	if len(v.siblings) > 0 {
		all = slices.Clone(all)
		for _, s := range v.siblings {
			all = append(all, s.Platforms...)
		}
	}
	mine := strings.Join(all, ", ")
	switch v.Reason {
	case OwnedAll:
		return "this CCM owns every node"
	case OwnedByProviderID:
		return "its provider ID's scheme is " + v.value
	case OwnedByDeclaration:
		return "it declares platform " + v.value
	case OwnedUndeclared:
		return "it declares no platform and undeclared nodes are adopted"
	case NotOwnedSchemeMismatch:
		return fmt.Sprintf("its provider ID's scheme %q is not one of this CCM's platforms (%s)", v.value, mine)
	case NotOwnedBadProviderID:
		return fmt.Sprintf("its spec.providerID %q is not <scheme>://<id>, so it names no platform of this CCM's (%s)", v.value, mine)
	case NotOwnedDeclared:
		return fmt.Sprintf("it declares platform %q, not one of this CCM's (%s)", v.value, mine)
	case NotOwnedConflict:
		return fmt.Sprintf("its labels %s=%q and %s=%q declare different platforms", LabelPlatform, v.value, LabelNodePlatform, v.other)
	case NotOwnedUndeclared:
		return fmt.Sprintf("it has no provider ID and no %s label, and undeclared nodes are ignored (--undeclared-nodes=ignore)", LabelNodePlatform)
	}
	return v.Reason
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
	case "", UndeclaredAdopt:
		return nil
	case UndeclaredIgnore:
		if slices.Contains(o.Platforms, AllPlatforms) {
			return fmt.Errorf("%s with every platform (%s) ignores nothing: name the platforms, or leave them to the provider", UndeclaredIgnore, AllPlatforms)
		}
		return nil
	}
	return fmt.Errorf("%q: must be %s or %s", o.Undeclared, UndeclaredAdopt, UndeclaredIgnore)
}

// OwnsEveryNode reports whether the configuration owns every node (no platforms, or
// AllPlatforms): Decide then looks at nothing, and a caller can skip it.
func (o NodeOwnership) OwnsEveryNode() bool {
	return len(o.Platforms) == 0 || slices.Contains(o.Platforms, AllPlatforms)
}

// Decide says whether the CCM owns node. The provider ID decides once set (it is
// immutable, and its scheme names the platform); before that the platform label; a node
// with neither follows Undeclared.
func (o NodeOwnership) Decide(node *corev1.Node) Verdict {
	if o.OwnsEveryNode() {
		return Verdict{Owned: true, Reason: OwnedAll}
	}
	v := Verdict{platforms: o.Platforms, siblings: o.Siblings}
	if id := node.Spec.ProviderID; id != "" {
		scheme, _, ok := strings.Cut(id, "://")
		switch {
		case !ok || scheme == "":
			v.Reason, v.value = NotOwnedBadProviderID, id
		case slices.Contains(o.Platforms, scheme):
			v.Owned, v.Reason, v.value = true, OwnedByProviderID, scheme
		default:
			v.Reason, v.value = NotOwnedSchemeMismatch, scheme
		}
		return v
	}
	a, b := node.Labels[LabelPlatform], node.Labels[LabelNodePlatform]
	declared := cmp.Or(a, b)
	switch {
	case a != "" && b != "" && a != b:
		v.Reason, v.value, v.other = NotOwnedConflict, a, b
	case declared != "" && slices.Contains(o.Platforms, declared):
		v.Owned, v.Reason, v.value = true, OwnedByDeclaration, declared
	case declared != "":
		v.Reason, v.value = NotOwnedDeclared, declared
	case o.Undeclared == UndeclaredIgnore:
		v.Reason = NotOwnedUndeclared
	default:
		v.Owned, v.Reason = true, OwnedUndeclared
	}
	return v
}
