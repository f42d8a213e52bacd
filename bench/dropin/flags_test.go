package dropin

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/manager"
)

// upstreamFlags is the flag set of upstream's cloud-controller-manager command, built
// by upstream's own constructor, so that a release adding a flag adds it here.
func upstreamFlags(t *testing.T) *pflag.FlagSet {
	t.Helper()
	o, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		t.Fatal(err)
	}
	cmd := app.NewCloudControllerManagerCommand(o, nil, app.DefaultInitFuncConstructors, names.CCMControllerAliases(), cliflag.NamedFlagSets{}, nil)
	return cmd.Flags()
}

// nepheleFlags is the flag set of nephele's cloud-controller-manager command.
func nepheleFlags() *pflag.FlagSet {
	cmd := manager.NewCommand("cloud-controller-manager", cloud.NewRegistry(), controllers.Default())
	cmd.InitDefaultHelpFlag() // cobra adds --help when the command runs
	return cmd.Flags()
}

// uncovered returns the flags of upstream that ours lacks, by name, those whose
// shorthand differs, and those upstream takes without a value that ours does not.
func uncovered(upstream, ours *pflag.FlagSet) []string {
	var missing []string
	upstream.VisitAll(func(f *pflag.Flag) {
		g := ours.Lookup(f.Name)
		switch {
		case g == nil:
			missing = append(missing, "--"+f.Name)
		case g.Shorthand != f.Shorthand:
			missing = append(missing, "--"+f.Name+" (shorthand -"+f.Shorthand+")")
		case f.NoOptDefVal != "" && g.NoOptDefVal == "":
			// Upstream takes it without a value (--flag); a manifest that does would fail.
			missing = append(missing, "--"+f.Name+" (without a value)")
		}
	})
	slices.Sort(missing)
	return missing
}

// TestEveryUpstreamFlagIsCovered fails on any flag of upstream's cloud-controller-manager
// that nephele's command does not know. A flag nephele has no use for is still
// registered, and refused at start with a reason (manager.Options.Complete), never left
// to cobra's bare "unknown flag".
func TestEveryUpstreamFlagIsCovered(t *testing.T) {
	up := upstreamFlags(t)
	if n := countFlags(up); n < 80 {
		t.Fatalf("upstream's command has %d flags: the constructor did not build the full set", n)
	}
	if missing := uncovered(up, nepheleFlags()); len(missing) > 0 {
		t.Errorf("nephele's cloud-controller-manager lacks %d of upstream's flags: %v", len(missing), missing)
	}
}

// TestUncoveredFindsANewFlag shows the check failing when upstream gains a flag nephele
// does not have.
func TestUncoveredFindsANewFlag(t *testing.T) {
	up := upstreamFlags(t)
	up.Bool("a-flag-of-a-future-release", false, "")
	got := uncovered(up, nepheleFlags())
	if !slices.Equal(got, []string{"--a-flag-of-a-future-release"}) {
		t.Errorf("uncovered = %v, want exactly the planted flag", got)
	}
}

func countFlags(fs *pflag.FlagSet) int {
	n := 0
	fs.VisitAll(func(*pflag.Flag) { n++ })
	return n
}
