package conformance_test

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud/conformance"
)

func sampleReport() *conformance.Report {
	return &conformance.Report{
		Provider: "example",
		Start:    time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC),
		Duration: 1500 * time.Millisecond,
		Results: []conformance.Result{
			{Clause: "provider/name", Title: "name ok", Status: conformance.Pass, Duration: time.Millisecond},
			{Clause: "instances/deleted-not-found", Title: "deleted is NotFound", Status: conformance.Fail,
				Message: `by provider ID: still found <i-1> & "running"` + "\nby node name: a temporary error (HTTP 500)", Duration: 2 * time.Second},
			{Clause: "routes/create-list", Title: "routes", Status: conformance.Skip, Message: "the provider does not claim the routes capability"},
			{Clause: "lb/ensure-status", Title: "status", Status: conformance.Pass},
		},
		Cleanup: []string{"instance ct-1-a: HTTP 500"},
	}
}

// parsed mirrors the JUnit schema independently of the package's own types, so that
// the test reads the document the way a CI dashboard would.
type parsed struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Suites   []struct {
		Name      string `xml:"name,attr"`
		Tests     int    `xml:"tests,attr"`
		Failures  int    `xml:"failures,attr"`
		Skipped   int    `xml:"skipped,attr"`
		Time      string `xml:"time,attr"`
		Timestamp string `xml:"timestamp,attr"`
		SystemErr string `xml:"system-err"`
		Cases     []struct {
			Name      string `xml:"name,attr"`
			ClassName string `xml:"classname,attr"`
			Time      string `xml:"time,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func TestWriteJUnit(t *testing.T) {
	var b strings.Builder
	if err := sampleReport().WriteJUnit(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "<?xml") {
		t.Errorf("the document does not start with an XML declaration:\n%s", b.String())
	}
	var doc parsed
	if err := xml.Unmarshal([]byte(b.String()), &doc); err != nil {
		t.Fatalf("the JUnit document does not parse: %v\n%s", err, b.String())
	}
	if doc.Tests != 4 || doc.Failures != 1 || doc.Skipped != 1 || doc.Errors != 0 {
		t.Errorf("testsuites counts tests=%d failures=%d skipped=%d errors=%d, want 4 1 1 0", doc.Tests, doc.Failures, doc.Skipped, doc.Errors)
	}
	if len(doc.Suites) != 1 {
		t.Fatalf("%d testsuite elements, want 1", len(doc.Suites))
	}
	s := doc.Suites[0]
	if s.Name != "nephele-conformance/example" || s.Tests != 4 || s.Failures != 1 || s.Skipped != 1 || s.Time != "1.500" || s.Timestamp != "2026-11-22T09:00:00Z" {
		t.Errorf("testsuite = %+v", s)
	}
	if len(s.Cases) != 4 {
		t.Fatalf("%d testcases, want 4", len(s.Cases))
	}
	failures, skips := 0, 0
	for _, c := range s.Cases {
		if c.Failure != nil {
			failures++
		}
		if c.Skipped != nil {
			skips++
		}
	}
	if failures != s.Failures || skips != s.Skipped {
		t.Errorf("the counts say %d failures and %d skipped, the cases hold %d and %d", s.Failures, s.Skipped, failures, skips)
	}
	fail := s.Cases[1]
	if fail.Name != "instances/deleted-not-found" || fail.ClassName != "conformance.example.instances" || fail.Time != "2.000" {
		t.Errorf("failed case = %+v", fail)
	}
	if fail.Failure == nil || fail.Failure.Message != `by provider ID: still found <i-1> & "running"` {
		t.Fatalf("failure = %+v, want the first line as the message, escaped and read back intact", fail.Failure)
	}
	if !strings.Contains(fail.Failure.Text, "by node name: a temporary error (HTTP 500)") {
		t.Errorf("failure text %q lacks the second problem", fail.Failure.Text)
	}
	if sk := s.Cases[2].Skipped; sk == nil || !strings.Contains(sk.Message, "does not claim the routes") {
		t.Errorf("skipped case = %+v", s.Cases[2])
	}
	if s.Cases[0].Failure != nil || s.Cases[0].Skipped != nil {
		t.Errorf("passed case has a failure or skip: %+v", s.Cases[0])
	}
	if !strings.Contains(s.SystemErr, "instance ct-1-a") {
		t.Errorf("system-err %q does not name what was left in the cloud", s.SystemErr)
	}
}

func TestWriteJUnitEmptyReport(t *testing.T) {
	var b strings.Builder
	if err := (&conformance.Report{}).WriteJUnit(&b); err != nil {
		t.Fatal(err)
	}
	var doc parsed
	if err := xml.Unmarshal([]byte(b.String()), &doc); err != nil {
		t.Fatalf("parsing: %v\n%s", err, b.String())
	}
	if doc.Tests != 0 || len(doc.Suites) != 1 || doc.Suites[0].Name != "nephele-conformance/unknown" {
		t.Errorf("empty report = %+v", doc)
	}
}

func TestWriteText(t *testing.T) {
	var b strings.Builder
	if err := sampleReport().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Conformance of cloud provider example",
		"PASS  provider/name",
		"FAIL  instances/deleted-not-found",
		"SKIP  routes/create-list",
		"FAIL instances/deleted-not-found:\n    by provider ID: still found",
		"\n    by node name: a temporary error (HTTP 500)",
		"Skipped:\n    routes/create-list: the provider does not claim the routes capability",
		"Not confirmed removed (check the cloud, remove by hand if there):\n    instance ct-1-a: HTTP 500",
		"FAIL: 2 passed, 1 failed, 1 skipped in 1.5s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
}

func TestReportCounts(t *testing.T) {
	r := sampleReport()
	if p, f, s := r.Counts(); p != 2 || f != 1 || s != 1 {
		t.Errorf("Counts() = %d, %d, %d; want 2, 1, 1", p, f, s)
	}
	if !r.Failed() {
		t.Error("Failed() = false with a failed clause")
	}
	r.Results = r.Results[:1]
	if r.Failed() {
		t.Error("Failed() = true with only passes")
	}
	if _, ok := r.Result("lb/ensure-status"); ok {
		t.Error("Result found a clause that is not in the report")
	}
}

func TestClausesAreUniqueAndNamed(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range conformance.Clauses() {
		if seen[c.ID] {
			t.Errorf("clause %s is listed twice", c.ID)
		}
		seen[c.ID] = true
		area, rule, ok := strings.Cut(c.ID, "/")
		if !ok || area == "" || rule == "" || c.Title == "" {
			t.Errorf("clause %+v: want an ID <area>/<rule> and a title", c)
		}
	}
}

// TestClausesAreDocumented keeps docs/conformance.md in step with the suite: every
// clause has its row.
func TestClausesAreDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range conformance.Clauses() {
		if !strings.Contains(string(doc), "| `"+c.ID+"` |") {
			t.Errorf("docs/conformance.md has no row for clause %s", c.ID)
		}
	}
}
