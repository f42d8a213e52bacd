package features

import (
	"os"
	"slices"
	"strings"
	"testing"

	"k8s.io/component-base/featuregate"
)

func TestNewHasUpstreamsGates(t *testing.T) {
	g, err := New()
	if err != nil {
		t.Fatalf("New: the gates compiled in clash: %v", err)
	}
	known := Known(g)
	for _, want := range []string{"CloudControllerManagerWebhook", "CloudControllerManagerWatchBasedRoutesReconciliation",
		"ControllerManagerReleaseLeaderElectionLockOnExit", "LoggingAlphaOptions", "ContextualLogging", "RemoteRequestHeaderUID"} {
		if !slices.Contains(known, want) {
			t.Errorf("gate %s missing from %v", want, known)
		}
	}
	if slices.Contains(known, "AllAlpha") {
		t.Error("Known lists the AllAlpha switch")
	}
	// Every gate is described on one line with its stage and default.
	lines := Describe(g)
	if len(lines) != len(known) {
		t.Fatalf("Describe has %d lines for %d gates", len(lines), len(known))
	}
	for _, l := range lines {
		if !strings.Contains(l, "=true (") && !strings.Contains(l, "=false (") {
			t.Errorf("line %q lacks the default and stage", l)
		}
	}
}

func TestGatesAreNotShared(t *testing.T) {
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Set("LoggingAlphaOptions=true"); err != nil {
		t.Fatal(err)
	}
	if b.Enabled("LoggingAlphaOptions") {
		t.Error("two gates from New share their settings")
	}
}

// TestDocsListEveryMeaning keeps docs/manager.md's table and Meaning one list: every gate
// with a meaning of its own is a row there.
func TestDocsListEveryMeaning(t *testing.T) {
	doc, err := os.ReadFile("../../docs/manager.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "### Feature gates")
	if !ok {
		t.Fatal(`docs/manager.md has no "### Feature gates" section`)
	}
	for name := range meanings {
		if !strings.Contains(table, "`"+string(name)+"`") {
			t.Errorf("docs/manager.md's feature gate table lacks %s (%s)", name, Meaning(name))
		}
	}
	if got := Meaning(featuregate.Feature("SomeAPIServerGate")); !strings.Contains(got, "no effect") {
		t.Errorf("an apiserver gate means %q", got)
	}
}
