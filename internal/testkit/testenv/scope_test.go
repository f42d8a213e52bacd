package testenv

import (
	"regexp"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

var validID = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

func TestScopeID(t *testing.T) {
	for _, name := range []string{"short", "A Very_Long Test Name/with subtests/and_more/and_more_still", "---"} {
		t.Run(name, func(t *testing.T) {
			a := NewScope(t, fake.NewClientset(), "nephele.dev/test")
			b := NewScope(t, fake.NewClientset(), "nephele.dev/test")
			for _, s := range []*Scope{a, b} {
				if len(s.ID) > maxScopeID || !validID.MatchString(s.ID) {
					t.Errorf("ID %q: want at most %d lower-case letters, digits and inner dashes", s.ID, maxScopeID)
				}
			}
			if a.ID == b.ID {
				t.Errorf("two scopes of one test share ID %q", a.ID)
			}
			if got, want := a.Selector(), "nephele.dev/test="+a.ID; got != want {
				t.Errorf("Selector() = %q, want %q", got, want)
			}
		})
	}
}
