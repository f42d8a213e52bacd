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
	created := f / 2
	return &results.Run{
		Scale: "small", Row: row, Description: row + " controllers",
		Params:   results.Params{Nodes: 200, Services: 50, FanOutNodes: 20, HeadOfLine: 10, RequestTimeout: results.Duration{Duration: 30 * time.Second}},
		Machine:  results.Machine{CPUs: 2, MemoryBytes: 8 << 30},
		Started:  start,
		Finished: start.Add(3 * time.Minute),
		Init: results.Init{Nodes: 200, Initialized: 200, Seconds: 3 * f, Created: &created, P50: f, P99: 2 * f,
			Calls: results.Calls{"instances.get": {200: uint64(200 * f)}, "routes.create": {201: 200}}, Timeline: tl},
		Services: results.Services{Services: 50, Ready: 50, Seconds: f, P50: f / 2, Calls: results.Calls{"lb.ensure": {201: 50}}},
		FanOut: results.FanOut{Nodes: 20, LoadBalancers: 50, Complete: 50, Seconds: 2 * f, UpdatesMean: f, UpdatesMax: int(f),
			Calls: results.Calls{"lb.update": {200: uint64(50 * f)}}, Timeline: tl},
		HeadOfLine: results.HeadOfLine{Others: 10, Ready: 10, Seconds: 3 * f, P50: f, Max: 3 * f, Held: 1, Timeline: tl},
		Steady: results.Steady{Nodes: 221, Services: 61, Seconds: 310,
			Calls: results.Calls{"instances.get": {200: uint64(221 * f)}, "routes.list": {200: uint64(30 * f)}}},
		Memory: results.Memory{PeakRSSBytes: uint64(f * 40 * (1 << 20)), PeakHeapLiveBytes: uint64(f * 10 * (1 << 20)),
			RSSTimeline: []results.Point{{T: 0, V: 30}, {T: 60, V: 40 * f}}},
		Converged: results.Converged{Seconds: 4 * f, Done: true},
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
	mustContain(t, md,
		"# Benchmark report: scale small",
		"| | nephele | upstream-tuned | upstream-defaults | upstream-tuned ÷ nephele | upstream-defaults ÷ nephele |",
		"## 1. Node initialization", "## 2. Steady state", "## 3. Load balancer fan-out",
		"## 4. Head-of-line blocking", "## 5. Memory", "## 6. Routes",
		"| time until all initialized (s) | 3.0 | 15.0 | 60.0 | 5.0x | 20.0x |",
		"| every Node created by the harness after (s) | 0.5 | 2.5 | 10.0 | | |",
		"instances.get 200<br>routes.create 200",
		"at least 10x faster than upstream defaults and 3x faster than upstream tuned. At this scale: **met** (20.0x faster than defaults, 5.0x faster than tuned)",
		"at most 0.1 cloud calls per node per hour. At this scale: **missed**",
		"at most 1 backend update per load balancer per burst, none that changes nothing. At this scale: **met**",
		"every one served before the hung call times out, 30s). At this scale: **met**",
		"at most half of upstream's peak RSS. At this scale: **met**",
		"![nodes initialized over time](init.png)",
		"## Converged",
		"| **everything converged after (s)** | 4.0 | 20.0 | 80.0 | | |",
		"converged ahead of every row. At this scale: **met** (nephele 4.0 s; upstream-tuned 20.0 s, upstream-defaults 80.0 s)",
		"| backend updates that changed nothing (all LBs) | 0 | 0 | 0 |",
	)
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
	mustContain(t, md,
		"3x faster than upstream tuned. At this scale: **missed** (1.5x faster than defaults, 1.2x faster than tuned)",
		"hung call times out, 30s). At this scale: **missed**",
		"at most half of upstream's peak RSS. At this scale: **missed**",
		"- nephele: fan-out: 3 of 50 load balancers got every new node: not done within 4m0s\n",
		"## Analysis\n\nInit is bound by the API client's QPS.",
	)
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

// crashed returns a run of row whose controller exited during initialization, as
// results/large-tuned-unlimited/upstream-tuned.json: the harness filled in
// initialization (timed out) and the steady state's node count, nothing else.
func crashed(row string, f float64) *results.Run {
	r := run(row, f)
	r.Init.Initialized, r.Init.TimedOut, r.Init.Routes = 150, true, results.Routes{Complete: 100}
	r.Init.Created = nil // as runs from before it was measured
	r.Services, r.FanOut, r.HeadOfLine, r.Memory = results.Services{}, results.FanOut{}, results.HeadOfLine{}, results.Memory{}
	r.Steady = results.Steady{Nodes: 201, RoutesMissing: 100}
	r.Converged = results.Converged{Missing: "node initialization, the init burst's routes, load balancers, the fan-out's backends, the fan-out's routes"}
	r.Problems = []string{"init: 150 of 200 nodes initialized: the controller process exited (exit status 1)"}
	return r
}

func TestReportScenariosNepheleDidNotRun(t *testing.T) {
	_, md := write(t, crashed("nephele", 1), run("upstream-tuned", 5), run("upstream-defaults", 20))
	mustContain(t, md,
		// Headers give the scale's numbers, not the first row's.
		"20 nodes join in a burst while 50 load balancers exist.",
		"50 LoadBalancer Services are created at once",
		"Once that call is in flight, 10 other Services are created",
		"| time until all initialized (s) | > 3.0 (timed out) | 15.0 | 60.0 | < 5.0x | < 20.0x |",
		"| initialized / joined | 150 / 200 (timed out) | 200 / 200 | 200 / 200 | | |",
		"| every Node created by the harness after (s) | not measured | 2.5 | 10.0 | | |",
		"| time until every LB has every node (s) | not run | 10.0 | 40.0 | | |",
		"| LBs complete | not run | 50 / 50 | 50 / 50 | | |",
		"| backend updates per LB, max | not run | 5 | 20 | | |",
		"| cloud calls by operation | not run | lb.update 250 | lb.update 1000 | | |",
		"| time until all others have an LB (s) | not run | 15.0 | 60.0 | | |",
		"| **recurring cloud calls per node per hour** | not run |",
		"| **peak RSS (MiB)** | not measured | 200.0 | 800.0 | | |",
		"| every fan-out node's route in the cloud after (s) | not run | 20 of 20 never got one in the run | 20 of 20 never got one in the run | | |",
		"| every initialized node's route in the cloud after (s) | 100 of 200 never got one in the run |",
		"3x faster than upstream tuned. At this scale: **missed** (nephele did not finish)",
		"Target (at most 0.1 cloud calls per node per hour): not judged, nephele did not run the steady state.",
		"Target (at most 1 backend update per load balancer per burst, none that changes nothing): not judged, nephele did not run the fan-out.",
		"hung call times out, 30s)): not judged, nephele did not run the head-of-line scenario.",
		"Target (at most half of upstream's peak RSS): not judged, nephele did not measure its peak RSS.",
	)
	for _, bad := range []string{"\n0 nodes join", "while 0 load balancers", "flight, 0 other Services", "\n0 LoadBalancer Services", "| 0.0x |", "**met**"} {
		if strings.Contains(md, bad) {
			t.Errorf("the report has %q", bad)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}

func TestReportScenariosUpstreamDidNotRun(t *testing.T) {
	_, md := write(t, run("nephele", 1), crashed("upstream-tuned", 5), run("upstream-defaults", 20))
	mustContain(t, md,
		"| time until all initialized (s) | 3.0 | > 15.0 (timed out) | 60.0 | > 5.0x | 20.0x |",
		"| LBs complete | 50 / 50 | not run | 50 / 50 | | |",
		"| **backend updates per LB**, mean | 1.0 | not run | 20.0 | | 20.0x |",
		"| Services with an LB | 50 / 50 | not run | 50 / 50 | | |",
		"| **peak RSS (MiB)** | 40.0 | not measured | 800.0 | | 20.0x |",
		"(20.0x faster than defaults, at least 5.0x faster than tuned)",
		"at most 1 backend update per load balancer per burst, none that changes nothing. At this scale: **met**",
		// Only the upstream row that measured its memory counts.
		"at most half of upstream's peak RSS. At this scale: **met** (nephele's peak RSS is 5% of upstream's (upstream-defaults's; upstream-tuned did not measure it))",
	)
	if strings.Contains(md, "Inf") {
		t.Error("the report divides by a peak RSS that was never measured")
	}
	// An upstream row that gave up sooner than the target's ratio cannot miss it for nephele.
	early := crashed("upstream-tuned", 5)
	early.Init.Seconds = 5
	_, md = write(t, run("nephele", 1), early, run("upstream-defaults", 20))
	if want := "3x faster than upstream tuned): not judged, an upstream row timed out too soon to tell: 20.0x faster than defaults, at least 1.7x faster than tuned."; !strings.Contains(md, want) {
		t.Errorf("the report lacks %q", want)
	}
	// Neither upstream row measured memory: not judged.
	tuned, defaults := crashed("upstream-tuned", 5), crashed("upstream-defaults", 20)
	_, md = write(t, run("nephele", 1), tuned, defaults)
	if want := "Target (at most half of upstream's peak RSS): not judged, neither upstream row measured its peak RSS."; !strings.Contains(md, want) {
		t.Errorf("the report lacks %q", want)
	}
	if want := "Target (at most 1 backend update per load balancer per burst, none that changes nothing): not judged"; strings.Contains(md, want) {
		t.Error("the fan-out target, nephele's alone, was not judged although nephele ran it")
	}
}

func TestReportDoneOfAndTimeouts(t *testing.T) {
	tuned, defaults := run("upstream-tuned", 5), run("upstream-defaults", 20)
	tuned.Services.Ready, tuned.Services.TimedOut, tuned.Services.Seconds = 40, true, 600
	defaults.HeadOfLine.Ready, defaults.HeadOfLine.TimedOut, defaults.HeadOfLine.Seconds = 7, true, 600
	defaults.FanOut.Complete, defaults.FanOut.TimedOut, defaults.FanOut.Seconds = 3, true, 600
	_, md := write(t, run("nephele", 1), tuned, defaults)
	mustContain(t, md,
		"| Services with an LB | 50 / 50 | 40 / 50 (timed out) | 50 / 50 | | |",
		"| time until all have an LB (s) | 1.0 | > 600.0 (timed out) | 20.0 | > 600.0x | 20.0x |",
		"| others with an LB | 10 / 10 | 10 / 10 | 7 / 10 (timed out) | | |",
		"| time until all others have an LB (s) | 3.0 | 15.0 | > 600.0 (timed out) | 5.0x | > 200.0x |",
		"| LBs complete | 50 / 50 | 50 / 50 | 3 / 50 (timed out) | | |",
		"| time until every LB has every node (s) | 2.0 | 10.0 | > 600.0 (timed out) | 5.0x | > 300.0x |",
	)
}

func TestReportRoutesOnlyInTheirSection(t *testing.T) {
	_, md := write(t, run("nephele", 1), run("upstream-tuned", 5), run("upstream-defaults", 20))
	routes := strings.Index(md, "## 6. Routes")
	if n := strings.Count(md, "route in the cloud after"); n != 2 || strings.Index(md, "route in the cloud after") < routes {
		t.Errorf("the report has %d lines of routes' times, not only the two of section 6", n)
	}
}

func TestReportLBCallsBeforeWindowOnlyWhenEveryRowMeasuredIt(t *testing.T) {
	withCount := func(row string, f float64, n int) *results.Run {
		r := run(row, f)
		r.Steady.LBCallsBeforeWindow = &n
		return r
	}
	tests := []struct {
		name string
		runs []*results.Run
		want bool
	}{
		{"every row measured it", []*results.Run{withCount("nephele", 1, 0), withCount("upstream-tuned", 5, 3)}, true},
		{"a row from before the harness waited", []*results.Run{withCount("nephele", 1, 0), run("upstream-tuned", 5)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, md := write(t, tt.runs...)
			line := strings.Contains(md, "load balancer calls in the quiet period before the window")
			text := strings.Contains(md, "every node's route and for load balancer calls to stop")
			if line != tt.want || text != tt.want {
				t.Errorf("load balancer calls line %v and text %v, want %v", line, text, tt.want)
			}
		})
	}
}

func TestReportCharts(t *testing.T) {
	r := newReport([]*results.Run{run("nephele", 1), crashed("upstream-tuned", 5), run("upstream-defaults", 20)})
	_, charts := r.markdown(nil)
	for name, step := range map[string]bool{"init.png": true, "fanout.png": true, "headofline.png": true, "memory.png": false} {
		c := charts[name]
		if c == nil || len(c.Series) != 3 {
			t.Fatalf("chart %s: %+v, want 3 series", name, c)
		}
		for _, s := range c.Series {
			if s.Step != step {
				t.Errorf("chart %s: series %s has Step %v, want %v", name, s.Name, s.Step, step)
			}
		}
	}
	// A row keeps its color in every chart; the legend says which did not run.
	if got := charts["fanout.png"].Series[1].Name; got != "upstream-tuned (not run)" {
		t.Errorf("fan-out legend %q", got)
	}
	if got := charts["init.png"].Series[1].Name; got != "upstream-tuned" {
		t.Errorf("init legend %q", got)
	}
	if got := charts["memory.png"].Series[1].Name; got != "upstream-tuned (not measured)" {
		t.Errorf("memory legend %q", got)
	}
}

// TestReportBatchedRouteLimit: with the cloud's batch, the routes' limit is the quota's
// time for the batches, or the harness's creation of the last Node plus one call when
// that is later; the routes target is judged against it, and a row that never
// converged says what it missed.
func TestReportBatchedRouteLimit(t *testing.T) {
	withCloud := func(r *results.Run) *results.Run {
		r.Params.CloudRateLimit, r.Params.CloudBurst = 50, 50
		r.Params.CloudLatency = results.Duration{Duration: 50 * time.Millisecond}
		r.Params.Nodes = 5000
		r.Params.MaxRouteChanges, r.Params.RouteApplyCost = 500, 10
		r.Init.Nodes, r.Init.Initialized = 5000, 5000
		return r
	}
	n := withCloud(run("nephele", 1))
	created := 7.9
	n.Init.Created = &created
	n.Init.Routes = results.Routes{Complete: 5000, Seconds: 9.5}
	tuned := withCloud(run("upstream-tuned", 5))
	tuned.Converged = results.Converged{Missing: "the init burst's routes"}
	// After convergence: 50 updates and 20 routes in one batch (10 tokens) at 50/s with
	// a burst of 50 take (60-50)/50 + 0.05 = 0.25 s at best.
	n.FanOutCalm = &results.FanOut{Nodes: 20, LoadBalancers: 50, Complete: 50, Seconds: 0.8, UpdatesMax: 1, Routes: results.Routes{Complete: 20, Seconds: 0.6}}
	tuned.FanOutCalm = &results.FanOut{Nodes: 20, LoadBalancers: 50, Complete: 50, Seconds: 3}
	_, md := write(t, n, tuned, withCloud(run("upstream-defaults", 20)))
	mustContain(t, md,
		// 10 batches of 10 tokens: (100-50)/50 + 0.05 = 1.05 s, below 7.9 + 0.05.
		"| every initialized node's route in the cloud after (s) | 9.5 |",
		"| 8.0 | 1.19x |",
		"up to 500 route changes in one routes.apply call costing 10 tokens of the quota",
		"the 5000-node burst's routes within 1.3x of the batched limit. At this scale: **met** (nephele 9.5 s, limit 8.0 s: 1.19x).",
		"not in the run (the init burst's routes)",
		"upstream-tuned did not converge in the run",
		"### 3b. Fan-out after convergence",
		"| time until every LB has every node (s) | 0.8 | 3.0 | not run | 3.8x | | 0.2 | 3.20x |",
		"ahead of upstream tuned and within 2x of the limit. At this scale: **missed** (nephele 0.8 s, upstream tuned 3.0 s, limit 0.2 s (3.20x))",
		"| every node's route of the fan-out after convergence in the cloud after (s) | 0.6 |",
	)
}

// mustContain fails t for each of wants that md lacks.
func mustContain(t *testing.T, md string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}
