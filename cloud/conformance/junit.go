package conformance

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// JUnit XML, in the shape CI dashboards (Jenkins, GitLab, Prow/Spyglass, TestGrid) read:
// one <testsuite> per run inside <testsuites>, one <testcase> per clause, with
// <failure> or <skipped> children.

// JUnitTestSuites is the root element of a JUnit XML report.
type JUnitTestSuites struct {
	XMLName  xml.Name         `xml:"testsuites"`
	Name     string           `xml:"name,attr"`
	Tests    int              `xml:"tests,attr"`
	Failures int              `xml:"failures,attr"`
	Errors   int              `xml:"errors,attr"`
	Skipped  int              `xml:"skipped,attr"`
	Time     string           `xml:"time,attr"`
	Suites   []JUnitTestSuite `xml:"testsuite"`
}

// JUnitTestSuite is one run of the suite against one provider.
type JUnitTestSuite struct {
	Name      string          `xml:"name,attr"`
	Tests     int             `xml:"tests,attr"`
	Failures  int             `xml:"failures,attr"`
	Errors    int             `xml:"errors,attr"`
	Skipped   int             `xml:"skipped,attr"`
	Time      string          `xml:"time,attr"`
	Timestamp string          `xml:"timestamp,attr,omitempty"`
	Cases     []JUnitTestCase `xml:"testcase"`
	SystemErr string          `xml:"system-err,omitempty"`
}

// JUnitTestCase is one clause.
type JUnitTestCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *JUnitMessage `xml:"failure,omitempty"`
	Skipped   *JUnitMessage `xml:"skipped,omitempty"`
}

// JUnitMessage is the body of a <failure> or <skipped> element.
type JUnitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// JUnit returns the report as JUnit XML elements.
func (r *Report) JUnit() JUnitTestSuites {
	provider := r.Provider
	if provider == "" {
		provider = "unknown"
	}
	passed, failed, skipped := r.Counts()
	suite := JUnitTestSuite{
		Name:     "nephele-conformance/" + provider,
		Tests:    passed + failed + skipped,
		Failures: failed,
		Skipped:  skipped,
		Time:     seconds(r.Duration),
	}
	if !r.Start.IsZero() {
		suite.Timestamp = r.Start.UTC().Format(time.RFC3339)
	}
	for _, res := range r.Results {
		group, _, _ := strings.Cut(res.Clause, "/")
		tc := JUnitTestCase{
			Name:      res.Clause,
			ClassName: "conformance." + provider + "." + group,
			Time:      seconds(res.Duration),
		}
		switch res.Status {
		case Fail:
			first, _, _ := strings.Cut(res.Message, "\n")
			tc.Failure = &JUnitMessage{Message: first, Type: "ContractViolation", Text: res.Title + "\n" + res.Message}
		case Skip:
			tc.Skipped = &JUnitMessage{Message: res.Message}
		}
		suite.Cases = append(suite.Cases, tc)
	}
	if len(r.Cleanup) > 0 {
		suite.SystemErr = "not confirmed removed from the cloud:\n" + strings.Join(r.Cleanup, "\n")
	}
	return JUnitTestSuites{
		Name:     "nephele-conformance",
		Tests:    suite.Tests,
		Failures: suite.Failures,
		Skipped:  suite.Skipped,
		Time:     suite.Time,
		Suites:   []JUnitTestSuite{suite},
	}
}

// WriteJUnit writes the report as a JUnit XML document.
func (r *Report) WriteJUnit(w io.Writer) error {
	out, err := xml.MarshalIndent(r.JUnit(), "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the JUnit report: %w", err)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	if _, err := w.Write(append(out, '\n')); err != nil {
		return err
	}
	return nil
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
