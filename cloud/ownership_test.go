package cloud

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ownershipNode(providerID string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID}}
}

func TestNodeOwnershipDecide(t *testing.T) {
	mine := NodeOwnership{Platforms: []string{"hcloud", "hrobot"}}
	strict := NodeOwnership{Platforms: []string{"hcloud", "hrobot"}, Undeclared: UndeclaredIgnore}
	for _, tc := range []struct {
		name       string
		o          NodeOwnership
		providerID string
		labels     map[string]string
		owned      bool
		reason     string
	}{
		{"zero value owns a foreign provider ID", NodeOwnership{}, "aws:///i-1", nil, true, OwnedAll},
		{"* owns a foreign provider ID", NodeOwnership{Platforms: []string{"local", AllPlatforms}}, "aws:///i-1", nil, true, OwnedAll},
		{"own scheme", mine, "hcloud://42", nil, true, OwnedByProviderID},
		{"second own scheme", mine, "hrobot://7", nil, true, OwnedByProviderID},
		{"foreign scheme", mine, "aws:///eu-west-1a/i-1", nil, false, NotOwnedSchemeMismatch},
		{"provider ID beats a label", mine, "aws:///i-1", map[string]string{LabelNodePlatform: "hcloud"}, false, NotOwnedSchemeMismatch},
		{"provider ID beats a foreign label", mine, "hcloud://1", map[string]string{LabelPlatform: "aws"}, true, OwnedByProviderID},
		{"malformed provider ID", mine, "i-1", nil, false, NotOwnedBadProviderID},
		{"scheme is case-sensitive", mine, "HCLOUD://1", nil, false, NotOwnedSchemeMismatch},
		{"no scheme", mine, "cn-hangzhou.i-123", nil, false, NotOwnedBadProviderID},
		{"empty scheme", mine, "://i-123", nil, false, NotOwnedBadProviderID},
		{"KEP label, ours", strict, "", map[string]string{LabelPlatform: "hcloud"}, true, OwnedByDeclaration},
		{"kubelet label, ours", strict, "", map[string]string{LabelNodePlatform: "hrobot"}, true, OwnedByDeclaration},
		{"both labels agree", strict, "", map[string]string{LabelPlatform: "hcloud", LabelNodePlatform: "hcloud"}, true, OwnedByDeclaration},
		{"both labels disagree", mine, "", map[string]string{LabelPlatform: "hcloud", LabelNodePlatform: "aws"}, false, NotOwnedConflict},
		{"declared elsewhere", mine, "", map[string]string{LabelNodePlatform: "on-prem"}, false, NotOwnedDeclared},
		{"declared elsewhere, strict", strict, "", map[string]string{LabelPlatform: "aws"}, false, NotOwnedDeclared},
		{"undeclared adopted by default", mine, "", nil, true, OwnedUndeclared},
		{"undeclared adopted", NodeOwnership{Platforms: []string{"x"}, Undeclared: UndeclaredAdopt}, "", nil, true, OwnedUndeclared},
		{"undeclared ignored", strict, "", map[string]string{"other": "label"}, false, NotOwnedUndeclared},
		{"empty label value is no declaration", strict, "", map[string]string{LabelNodePlatform: ""}, false, NotOwnedUndeclared},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.o.Decide(ownershipNode(tc.providerID, tc.labels))
			if v.Owned != tc.owned || v.Reason != tc.reason {
				t.Errorf("Decide = %+v, want owned=%v reason=%s", v, tc.owned, tc.reason)
			}
			if v.Detail() == "" {
				t.Error("the verdict has no detail for the Event")
			}
		})
	}
}

func TestNodeOwnershipValidate(t *testing.T) {
	for _, tc := range []struct {
		o       NodeOwnership
		wantErr string
	}{
		{NodeOwnership{}, ""},
		{NodeOwnership{Platforms: []string{"aws", "*"}}, ""},
		{NodeOwnership{Platforms: []string{"aws"}, Undeclared: UndeclaredIgnore}, ""},
		{NodeOwnership{Platforms: []string{"AWS"}}, `platform "AWS"`},
		{NodeOwnership{Platforms: []string{""}}, `platform ""`},
		{NodeOwnership{Platforms: []string{"a://b"}}, `platform "a://b"`},
		{NodeOwnership{Undeclared: "delete"}, `"delete": must be adopt or ignore`},
		{NodeOwnership{Platforms: []string{AllPlatforms}, Undeclared: UndeclaredIgnore}, "ignores nothing"},
	} {
		err := tc.o.Validate()
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("Validate(%+v) = %v, want nil", tc.o, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("Validate(%+v) = %v, want an error containing %q", tc.o, err, tc.wantErr)
		}
	}
}

type platformProvider struct {
	namedProvider
	platforms []string
}

func (p platformProvider) ProviderPlatforms() []string { return p.platforms }

func TestPlatforms(t *testing.T) {
	if got := Platforms(namedProvider{name: "local"}); len(got) != 1 || got[0] != "local" {
		t.Errorf("Platforms of a provider without ProviderPlatforms = %v, want [local]", got)
	}
	p := platformProvider{namedProvider{"hcloud"}, []string{"hcloud", "hrobot"}}
	got := Platforms(p)
	if strings.Join(got, ",") != "hcloud,hrobot" {
		t.Errorf("Platforms = %v, want [hcloud hrobot]", got)
	}
	got[0] = "changed"
	if p.platforms[0] != "hcloud" {
		t.Error("Platforms returned the provider's own slice")
	}
	if got := Platforms(platformProvider{namedProvider: namedProvider{"x"}}); len(got) != 1 || got[0] != "x" {
		t.Errorf("Platforms of a provider listing none = %v, want its name", got)
	}
}

// Deciding runs on every node event of several controllers: it must not allocate.
func TestNodeOwnershipDecideAllocatesNothing(t *testing.T) {
	o := NodeOwnership{Platforms: []string{"local"}, Undeclared: UndeclaredIgnore}
	nodes := []*corev1.Node{
		ownershipNode("local://i-1", nil),
		ownershipNode("aws:///i-1", nil),
		ownershipNode("", map[string]string{LabelNodePlatform: "local"}),
		ownershipNode("", nil),
	}
	if n := testing.AllocsPerRun(100, func() {
		for _, node := range nodes {
			_ = o.Decide(node)
		}
	}); n != 0 {
		t.Errorf("Decide allocates %v times per round", n)
	}
}
