package upstreame2e

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"
)

// State is a test's outcome.
type State string

// The outcomes of a test.
const (
	Passed  State = "passed"
	Failed  State = "failed"
	Skipped State = "skipped"
)

// Result is one test the suite selected.
type Result struct {
	// Name is the test's full name, as ginkgo's --focus matches it.
	Name string
	// State is its outcome.
	State State
	// Message is, for a failure, its first line and where it happened; for a skip, the
	// reason the test gave.
	Message string
	// Duration is how long it ran.
	Duration time.Duration
}

// Report is what one suite gave.
type Report struct {
	Suite    Suite
	Results  []Result
	Duration time.Duration
	// Log is ginkgo's output.
	Log string
}

// Count is how many results are in state.
func (r *Report) Count(state State) int {
	n := 0
	for _, res := range r.Results {
		if res.State == state {
			n++
		}
	}
	return n
}

// Failed is the number of failed tests.
func (r *Report) Failed() int { return r.Count(Failed) }

// junit is the part of ginkgo's JUnit report (reporters.JUnitTestSuites) read here.
type junit struct {
	Suites []struct {
		Cases []struct {
			Name    string  `xml:"name,attr"`
			Status  string  `xml:"status,attr"`
			Time    float64 `xml:"time,attr"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Text    string `xml:",chardata"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// ReadJUnit reads the JUnit report e2e.test writes (--report-dir/junit_01.xml). Tests
// the focus and skip expressions left out ("skipped" with no reason) and the suite's
// setup and report nodes ([SynchronizedBeforeSuite] and the like) are not listed.
func ReadJUnit(path string) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseJUnit(f)
}

// setupNode names the suite-level nodes ginkgo reports beside the tests.
var setupNode = regexp.MustCompile(`^\[(SynchronizedBeforeSuite|SynchronizedAfterSuite|BeforeSuite|AfterSuite|ReportBeforeSuite|ReportAfterSuite|DeferCleanup \(Suite\))\]`)

func parseJUnit(r io.Reader) (*Report, error) {
	var j junit
	if err := xml.NewDecoder(r).Decode(&j); err != nil {
		return nil, fmt.Errorf("read JUnit report: %w", err)
	}
	rep := &Report{}
	for _, s := range j.Suites {
		for _, c := range s.Cases {
			res := Result{Name: strings.TrimSpace(c.Name), Duration: time.Duration(c.Time * float64(time.Second))}
			switch {
			case c.Failure != nil:
				res.State, res.Message = Failed, failureSummary(c.Failure.Message, c.Failure.Text)
			case c.Error != nil:
				res.State, res.Message = Failed, failureSummary(c.Error.Message, c.Error.Text)
			case c.Skipped != nil:
				reason, given := strings.CutPrefix(c.Skipped.Message, "skipped - ")
				if !given {
					continue // left out by --focus/--skip: not run
				}
				res.State, res.Message = Skipped, firstLine(reason)
			default:
				res.State = Passed
			}
			if setupNode.MatchString(res.Name) && res.State != Failed {
				continue
			}
			rep.Results = append(rep.Results, res)
		}
	}
	return rep, nil
}

// failureSummary is a failure's first line and the place it happened: ginkgo's
// failure text has "[FAILED] <message>" and "In [It] at: <file>:<line>".
func failureSummary(message, text string) string {
	var msg, where string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case msg == "" && strings.HasPrefix(line, "[FAILED] "):
			msg = strings.TrimPrefix(line, "[FAILED] ")
		case msg == "" && strings.HasPrefix(line, "[TIMEDOUT] "), msg == "" && strings.HasPrefix(line, "[PANICKED] "), msg == "" && strings.HasPrefix(line, "[INTERRUPTED] "):
			msg = line
		case where == "" && strings.HasPrefix(line, "In ") && strings.Contains(line, " at: "):
			where = line[strings.Index(line, " at: ")+len(" at: "):]
		}
	}
	if msg == "" {
		msg = firstLine(message)
	}
	if msg == "" {
		msg = firstLine(text)
	}
	if where != "" {
		if i := strings.LastIndex(where, "/test/e2e/"); i >= 0 {
			where = where[i+1:]
		}
		msg += " (" + strings.Fields(where)[0] + ")"
	}
	return msg
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(line)
}

// WriteSummary writes the reports as Markdown tables, one row per test: its outcome,
// its name, and the failure or skip reason.
func WriteSummary(w io.Writer, reports ...*Report) error {
	for _, r := range reports {
		if _, err := fmt.Fprintf(w, "### %s: %d passed, %d failed, %d skipped (%s)\n\nfocus `%s`", r.Suite.Name,
			r.Count(Passed), r.Count(Failed), r.Count(Skipped), r.Duration.Round(time.Second), r.Suite.Focus); err != nil {
			return err
		}
		if r.Suite.Skip != "" {
			fmt.Fprintf(w, ", skip `%s`", r.Suite.Skip)
		}
		fmt.Fprintf(w, ", --provider=%s, %d ginkgo nodes\n\n| result | test | reason |\n|---|---|---|\n", r.Suite.Provider, max(r.Suite.Parallel, 1))
		for _, res := range r.Results {
			fmt.Fprintf(w, "| %s | %s | %s |\n", res.State, mdEscape(res.Name), mdEscape(res.Message))
		}
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
	}
	return nil
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
