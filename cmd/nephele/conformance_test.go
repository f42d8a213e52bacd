package main

import (
	"encoding/xml"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud/cloudtest"
	"github.com/nephele-dev/nephele/internal/testkit/clustertest"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
)

// conformanceTimeout bounds one `nephele conformance` run; a run against the local
// cloud takes seconds.
const conformanceTimeout = 3 * time.Minute

// runningLocalcloud is a localcloud process started by a test.
type runningLocalcloud struct {
	endpoint  string
	tokenFile string
}

// startLocalcloud builds cmd/localcloud and runs it on a free loopback port with
// ranges of its own; the process is stopped when the test ends.
func startLocalcloud(t *testing.T) runningLocalcloud {
	t.Helper()
	bin, dir := clustertest.Commands(t, "localcloud"), t.TempDir()
	tokenFile, addrFile := filepath.Join(dir, "token"), filepath.Join(dir, "addr")
	if err := os.WriteFile(tokenFile, []byte("conformance-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vipPool, instanceCIDR := loopbackRanges()
	p := proctest.Exec(t, "localcloud", filepath.Join(bin, "localcloud"), "--state", filepath.Join(dir, "state.db"),
		"--token-file", tokenFile, "--listen", "127.0.0.1:0", "--address-file", addrFile,
		"--vip-pool", vipPool, "--instance-cidr", instanceCIDR, "--disable-health-checks")
	t.Cleanup(func() { p.Stop(t, stopTimeout) })
	var addr string
	poll.Within(t, runTimeout, "localcloud to write its address file", func() error {
		if err := p.Err(); err != nil {
			t.Fatalf("localcloud exited before serving: %v", err)
		}
		raw, err := os.ReadFile(addrFile)
		if err != nil {
			return err
		}
		if addr = strings.TrimSpace(string(raw)); addr == "" {
			return fmt.Errorf("%s is empty", addrFile)
		}
		return nil
	})
	return runningLocalcloud{endpoint: "http://" + addr, tokenFile: tokenFile}
}

// cloudConfig writes a local provider cloud config for endpoint.
func cloudConfig(t *testing.T, endpoint, tokenFile string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cloud.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, "endpoint: %s\ntokenFile: %s\n", endpoint, tokenFile), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runNephele runs nephele with args as a process and returns its exit code and output.
func runNephele(t *testing.T, args ...string) (int, string) {
	t.Helper()
	p := proctest.Start(t, "nephele", args...)
	code := p.Wait(t, conformanceTimeout)
	return code, p.Output()
}

// junitReport is the JUnit document as a CI dashboard reads it.
type junitReport struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Suites   []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Skipped  int    `xml:"skipped,attr"`
		Cases    []struct {
			Name    string    `xml:"name,attr"`
			Failure *struct{} `xml:"failure"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// readJUnit parses the JUnit file and checks that its counts agree with its cases.
func readJUnit(t *testing.T, path string) junitReport {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the JUnit report: %v", err)
	}
	var r junitReport
	if err := xml.Unmarshal(raw, &r); err != nil {
		t.Fatalf("the JUnit report does not parse: %v\n%s", err, raw)
	}
	if len(r.Suites) != 1 {
		t.Fatalf("%d testsuite elements, want 1", len(r.Suites))
	}
	s := r.Suites[0]
	failures, skipped := 0, 0
	for _, c := range s.Cases {
		if c.Failure != nil {
			failures++
		}
		if c.Skipped != nil {
			skipped++
		}
	}
	if s.Tests != len(s.Cases) || s.Failures != failures || s.Skipped != skipped ||
		r.Tests != s.Tests || r.Failures != s.Failures || r.Skipped != s.Skipped {
		t.Errorf("counts disagree: testsuites %d/%d/%d, testsuite %d/%d/%d, cases %d/%d/%d (tests/failures/skipped)",
			r.Tests, r.Failures, r.Skipped, s.Tests, s.Failures, s.Skipped, len(s.Cases), failures, skipped)
	}
	return r
}

// TestConformanceCommand runs `nephele conformance` as a process against a real local
// cloud process: it passes against the running cloud, fails against a wrong endpoint,
// and writes valid JUnit XML either way.
func TestConformanceCommand(t *testing.T) {
	lc := startLocalcloud(t)
	clauses := len(cloudtest.Clauses())

	t.Run("running cloud", func(t *testing.T) {
		junit := filepath.Join(t.TempDir(), "out.xml")
		code, out := runNephele(t, "conformance", "--provider", "local", "--cloud-config", cloudConfig(t, lc.endpoint, lc.tokenFile), "--junit", junit)
		if code != 0 {
			t.Fatalf("exit code %d, want 0:\n%s", code, out)
		}
		for _, want := range []string{"PASS  instances/deleted-not-found", "PASS  errors/throttled-retry-after", fmt.Sprintf("PASS: %d passed, 0 failed, 0 skipped", clauses)} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		r := readJUnit(t, junit)
		if r.Tests != clauses || r.Failures != 0 || r.Skipped != 0 || r.Suites[0].Name != "nephele-conformance/local" {
			t.Errorf("JUnit report: %d tests, %d failures, %d skipped in %s; want %d, 0, 0 in nephele-conformance/local", r.Tests, r.Failures, r.Skipped, r.Suites[0].Name, clauses)
		}
	})

	t.Run("without fault injection", func(t *testing.T) {
		junit := filepath.Join(t.TempDir(), "out.xml")
		code, out := runNephele(t, "conformance", "--provider", "local", "--cloud-config", cloudConfig(t, lc.endpoint, lc.tokenFile), "--junit", junit, "--fault-injection=false")
		if code != 0 {
			t.Fatalf("exit code %d, want 0:\n%s", code, out)
		}
		r := readJUnit(t, junit)
		skipped := map[string]bool{}
		for _, c := range r.Suites[0].Cases {
			if c.Skipped != nil {
				skipped[c.Name] = true
			}
		}
		if len(skipped) != 2 || !skipped["errors/throttled-retry-after"] || !skipped["context/deadline"] {
			t.Errorf("skipped %v, want exactly the throttling and deadline clauses", skipped)
		}
	})

	t.Run("wrong endpoint", func(t *testing.T) {
		junit := filepath.Join(t.TempDir(), "out.xml")
		port := testnet.FreePort(t, "tcp", netip.MustParseAddr("127.0.0.1"))
		code, out := runNephele(t, "conformance", "--provider", "local", "--cloud-config", cloudConfig(t, fmt.Sprintf("http://127.0.0.1:%d", port), lc.tokenFile), "--junit", junit)
		if code == 0 {
			t.Fatalf("exit code 0 against a cloud that is not there:\n%s", out)
		}
		if !strings.Contains(out, "connection refused") || !strings.Contains(out, "nephele: conformance: provider local fails") {
			t.Errorf("output does not say what failed:\n%s", out)
		}
		if r := readJUnit(t, junit); r.Failures == 0 || r.Tests != clauses {
			t.Errorf("JUnit report: %d tests, %d failures; want %d tests, some failed", r.Tests, r.Failures, clauses)
		}
	})

	t.Run("no cloud config", func(t *testing.T) {
		junit := filepath.Join(t.TempDir(), "out.xml")
		code, out := runNephele(t, "conformance", "--provider", "local", "--junit", junit)
		if code == 0 || !strings.Contains(out, "FAIL  provider/new") {
			t.Fatalf("exit code %d, want non-zero and a failed provider/new:\n%s", code, out)
		}
		if r := readJUnit(t, junit); r.Tests != 1 || r.Failures != 1 {
			t.Errorf("JUnit report: %d tests, %d failures; want the one failed provider/new", r.Tests, r.Failures)
		}
	})
}

// TestConformanceFlags checks that bad flags fail before anything runs, saying which.
func TestConformanceFlags(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown provider", []string{"--provider", "aws"}, `unknown provider "aws": this nephele has local`},
		{"no provider", nil, `required flag(s) "provider" not set`},
		{"missing cloud config", []string{"--provider", "local", "--cloud-config", filepath.Join(dir, "nope.yaml")}, "--cloud-config"},
		{"junit in a missing directory", []string{"--provider", "local", "--junit", filepath.Join(dir, "missing", "out.xml")}, "--junit"},
		{"bad call timeout", []string{"--provider", "local", "--call-timeout", "0s"}, "--call-timeout 0s: must be positive"},
		{"arguments", []string{"--provider", "local", "extra"}, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := newRootCommand()
			var out strings.Builder
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(append([]string{"conformance"}, tt.args...))
			err := cmd.ExecuteContext(t.Context())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q (output: %s)", err, tt.want, out.String())
			}
			if strings.Contains(out.String(), "Conformance of cloud provider") {
				t.Errorf("the suite ran despite the bad flags:\n%s", out.String())
			}
		})
	}
}
