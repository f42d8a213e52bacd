package report

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/bench/results"
)

// run returns a run of row whose numbers scale with f (bigger is worse).
func run(row string, f float64) *results.Run {
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tl := []results.Point{{T: 0, V: 0}, {T: 2 * f, V: 100}, {T: 3 * f, V: 200}}
	return &results.Run{
		Scale: "small", Row: row, Description: row + " controllers",
		Params:   results.Params{Nodes: 200, Services: 50, FanOutNodes: 20, HeadOfLine: 10, RequestTimeout: results.Duration{Duration: 30 * time.Second}},
		Machine:  results.Machine{CPUs: 2, MemoryBytes: 8 << 30},
		Started:  start,
		Finished: start.Add(3 * time.Minute),
		Init: results.Init{Nodes: 200, Initialized: 200, Seconds: 3 * f, P50: f, P99: 2 * f,
			Calls: results.Calls{"instances.get": {200: uint64(200 * f)}, "routes.create": {201: 200}}, Timeline: tl},
		Services: results.Services{Services: 50, Ready: 50, Seconds: f, P50: f / 2, Calls: results.Calls{"lb.ensure": {201: 50}}},
		FanOut: results.FanOut{Nodes: 20, LoadBalancers: 50, Complete: 50, Seconds: 2 * f, UpdatesMean: f, UpdatesMax: int(f),
			Calls: results.Calls{"lb.update": {200: uint64(50 * f)}}, Timeline: tl},
		HeadOfLine: results.HeadOfLine{Others: 10, Ready: 10, Seconds: 3 * f, P50: f, Max: 3 * f, Held: 1, Timeline: tl},
		Steady: results.Steady{Nodes: 221, Services: 61, Seconds: 310,
			Calls: results.Calls{"instances.get": {200: uint64(221 * f)}, "routes.list": {200: uint64(30 * f)}}},
		Memory: results.Memory{PeakRSSBytes: uint64(f * 40 * (1 << 20)), PeakHeapLiveBytes: uint64(f * 10 * (1 << 20)),
			RSSTimeline: []results.Point{{T: 0, V: 30}, {T: 60, V: 40 * f}}},
	}
}

func write(t *testing.T, runs ...*results.Run) (string, string) {
	t.Helper()
	dir := t.TempDir()
	for _, r := range runs {
		if err := results.Save(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	path, err := Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return dir, string(b)
}

func TestReportTablesTargetsAndCharts(t *testing.T) {
	// nephele at 1, tuned at 5, defaults at 20: every ratio target is met but the
	// steady-state one (1 call per node per window is far above 0.1 per hour).
	dir, md := write(t, run("nephele", 1), run("upstream-tuned", 5), run("upstream-defaults", 20))
	for _, want := range []string{
		"# Benchmark report: scale small",
		"| | nephele | upstream-tuned | upstream-defaults | upstream-tuned ÷ nephele | upstream-defaults ÷ nephele |",
		"## 1. Node initialization", "## 2. Steady state", "## 3. Load balancer fan-out",
		"## 4. Head-of-line blocking", "## 5. Memory", "## 6. Routes",
		"| time until all initialized (s) | 3.0 | 15.0 | 60.0 | 5.0x | 20.0x |",
		"instances.get 200<br>routes.create 200",
		"at least 10x faster than upstream defaults and 3x faster than upstream tuned. At this scale: **met** (20.0x faster than defaults, 5.0x faster than tuned)",
		"at most 0.1 cloud calls per node per hour. At this scale: **missed**",
		"at most 2 backend updates per load balancer per burst. At this scale: **met**",
		"every one served before the hung call times out, 30s). At this scale: **met**",
		"at most half of upstream's peak RSS. At this scale: **met**",
		"![nodes initialized over time](init.png)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if strings.Contains(md, "## Analysis") {
		t.Error("the report has an analysis section without notes")
	}
	for _, name := range []string{"init.png", "fanout.png", "headofline.png", "memory.png"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("chart %s: %v", name, err)
		}
		_, err = png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("chart %s is not a PNG: %v", name, err)
		}
	}
}

func TestReportMissedTargetsAndNotes(t *testing.T) {
	slow := run("nephele", 4)
	slow.HeadOfLine.Max = 31
	slow.Problems = []string{"fan-out: 3 of 50 load balancers got every new node: not done within 4m0s\nlog lines"}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, NotesFile), []byte("Init is bound by the API client's QPS.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*results.Run{slow, run("upstream-tuned", 5), run("upstream-defaults", 6)} {
		if err := results.Save(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	path, err := Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	md := string(b)
	for _, want := range []string{
		"3x faster than upstream tuned. At this scale: **missed** (1.5x faster than defaults, 1.2x faster than tuned)",
		"hung call times out, 30s). At this scale: **missed**",
		"at most half of upstream's peak RSS. At this scale: **missed**",
		"- nephele: fan-out: 3 of 50 load balancers got every new node: not done within 4m0s\n",
		"## Analysis\n\nInit is bound by the API client's QPS.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if strings.Contains(md, "log lines") {
		t.Error("a problem's log lines leaked into the report")
	}
}

func TestReportWithoutAllRows(t *testing.T) {
	_, md := write(t, run("nephele", 1))
	if !strings.Contains(md, "not judged, the run lacks a row") {
		t.Error("a report with one row judged the targets")
	}
	if strings.Contains(md, "÷ nephele") {
		t.Error("a report without upstream rows has ratio columns")
	}
	if _, err := Write(t.TempDir()); err == nil {
		t.Error("Write succeeded without results")
	}
}
