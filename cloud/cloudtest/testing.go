package cloudtest

import (
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/cloud/conformance"
)

// Run runs the suite as subtests of t, one per clause, named after the clause: a
// failed clause fails its subtest with the problems found, a clause that does not
// apply is skipped with the reason. What the suite could not remove from the cloud
// fails t. Run returns the report, which holds the same results.
//
// Skips are not environment-dependent: a clause is skipped only when the provider does
// not claim the capability it needs, the setup cannot induce the fault it needs, or
// the setup names it in Skip, so a skip in CI means the same as a skip on a laptop.
func Run(t *testing.T, setup Setup) *Report {
	t.Helper()
	rep, err := conformance.RunClauses(t.Context(), setup, func(cl Clause, check func() Result) Result {
		var res Result
		t.Run(cl.ID, func(t *testing.T) {
			res = check()
			switch res.Status {
			case Fail:
				t.Errorf("%s: %s\n%s", res.Clause, res.Title, indent(res.Message))
			case Skip:
				t.Skip(res.Message)
			}
		})
		return res
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, left := range rep.Cleanup {
		t.Errorf("cloudtest could not confirm it removed %s", left)
	}
	return rep
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
