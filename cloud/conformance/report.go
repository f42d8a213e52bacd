package conformance

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Status is the outcome of one check.
type Status string

// The outcomes of a check.
const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
)

// Result is the outcome of one check.
type Result struct {
	// Clause is the contract clause the check tests, such as "instances/deleted-not-found".
	Clause string
	// Title says in a few words what the clause requires.
	Title string
	// Status is PASS, FAIL or SKIP.
	Status Status
	// Message says why the check failed (one line per problem) or was skipped.
	Message string
	// Duration is how long the check took.
	Duration time.Duration
}

// Report is the outcome of a run of the suite.
type Report struct {
	// Provider is the name the provider reported, or empty when it could not be built.
	Provider string
	// Start is when the run started.
	Start time.Time
	// Duration is how long the run took.
	Duration time.Duration
	// Results are the checks in the order they ran.
	Results []Result
	// Cleanup lists what the suite may have created and could not confirm removed at
	// the end, with the error. It does not fail the run, but names what may be left in
	// the cloud.
	Cleanup []string
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool {
	for _, res := range r.Results {
		if res.Status == Fail {
			return true
		}
	}
	return false
}

// Counts returns the number of passed, failed and skipped checks.
func (r *Report) Counts() (passed, failed, skipped int) {
	for _, res := range r.Results {
		switch res.Status {
		case Pass:
			passed++
		case Fail:
			failed++
		case Skip:
			skipped++
		}
	}
	return passed, failed, skipped
}

// Result returns the result of clause, and whether it ran.
func (r *Report) Result(clause string) (Result, bool) {
	for _, res := range r.Results {
		if res.Clause == clause {
			return res, true
		}
	}
	return Result{}, false
}

// WriteText writes a readable summary: one line per check with its status and clause,
// the reasons of failures and skips indented below, and the totals.
func (r *Report) WriteText(w io.Writer) error {
	name := r.Provider
	if name == "" {
		name = "(provider not built)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Conformance of cloud provider %s\n\n", name)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.Status, res.Clause, res.Title, res.Duration.Round(time.Millisecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, res := range r.Results {
		if res.Status == Pass || res.Message == "" {
			continue
		}
		if res.Status == Fail {
			fmt.Fprintf(&b, "\n%s %s:\n", res.Status, res.Clause)
			for line := range strings.SplitSeq(res.Message, "\n") {
				fmt.Fprintf(&b, "    %s\n", line)
			}
		}
	}
	skips := false
	for _, res := range r.Results {
		if res.Status != Skip {
			continue
		}
		if !skips {
			b.WriteString("\nSkipped:\n")
			skips = true
		}
		fmt.Fprintf(&b, "    %s: %s\n", res.Clause, strings.ReplaceAll(res.Message, "\n", "; "))
	}
	if len(r.Cleanup) > 0 {
		b.WriteString("\nNot confirmed removed (check the cloud, remove by hand if there):\n")
		for _, c := range r.Cleanup {
			fmt.Fprintf(&b, "    %s\n", c)
		}
	}
	passed, failed, skipped := r.Counts()
	verdict := "PASS"
	if failed > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "\n%s: %d passed, %d failed, %d skipped in %s\n", verdict, passed, failed, skipped, r.Duration.Round(time.Millisecond))
	_, err := io.WriteString(w, b.String())
	return err
}
