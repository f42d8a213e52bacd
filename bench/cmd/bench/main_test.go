package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/bench/ccm"
	"github.com/nephele-dev/nephele/bench/ccm/nephele"
	"github.com/nephele-dev/nephele/bench/ccm/upstream"
	"github.com/nephele-dev/nephele/bench/harness"
	"github.com/nephele-dev/nephele/bench/results"
)

// childEnv makes the test binary a controller process carrying both implementations,
// as `bench ccm` does. (The benchmark proper runs each from a binary of its own.)
const childEnv = "NEPHELE_BENCH_CCM_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(ccm.Main(os.Args[1:], os.Stderr, map[ccm.Impl]ccm.Func{ccm.Nephele: nephele.Run, ccm.Upstream: upstream.Run}))
	}
	os.Exit(m.Run())
}

// TestTinyScaleEndToEnd runs every row through every scenario at the tiny scale on a
// real control plane, so that the harness, both controller implementations and the
// report cannot rot between benchmark runs.
func TestTinyScaleEndToEnd(t *testing.T) {
	scale, err := harness.ScaleNamed("tiny")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	dir := filepath.Join(out, scale.Name)
	cfg := harness.Config{
		Scale:  scale,
		Rows:   harness.Rows(),
		OutDir: dir,
		ControllerCommand: func(_ ccm.Impl, args []string) *exec.Cmd {
			cmd := exec.Command(self, args...)
			cmd.Env = append(os.Environ(), childEnv+"=1")
			return cmd
		},
		Logf: t.Logf,
	}
	start := time.Now()
	runs, err := harness.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("harness.Run: %v", err)
	}
	t.Logf("tiny scale took %s", time.Since(start).Round(time.Second))
	if len(runs) != 3 {
		t.Fatalf("%d runs, want 3", len(runs))
	}
	for _, r := range runs {
		check := func(ok bool, what string, args ...any) {
			t.Helper()
			if !ok {
				t.Errorf("%s: "+what, append([]any{r.Row}, args...)...)
			}
		}
		check(len(r.Problems) == 0, "problems: %q", r.Problems)
		check(r.Init.Initialized == scale.Nodes && !r.Init.TimedOut && r.Init.Seconds > 0, "init %+v", r.Init)
		check(r.Services.Ready == scale.Services && r.Services.Seconds > 0, "services %+v", r.Services)
		check(r.Services.Calls.Op("lb.ensure") >= uint64(scale.Services), "services made %d ensures", r.Services.Calls.Op("lb.ensure"))
		check(r.FanOut.Complete == scale.Services && !r.FanOut.TimedOut && r.FanOut.Seconds > 0, "fan-out %+v", r.FanOut)
		check(r.FanOut.UpdatesMean+r.FanOut.EnsuresMean >= 1, "fan-out issued no backend change: %+v", r.FanOut)
		check(r.HeadOfLine.Ready == scale.HeadOfLine && r.HeadOfLine.Held >= 1, "head-of-line %+v", r.HeadOfLine)
		check(r.Steady.Seconds >= scale.SteadyWindow.Seconds() && r.Steady.Nodes == 1+scale.Nodes+scale.FanOutNodes+scale.NeighbourNodes, "steady %+v", r.Steady)
		check(r.Neighbour.Initialized == scale.NeighbourNodes && r.Neighbour.Ready == scale.NeighbourServices && !r.Neighbour.TimedOut &&
			r.Neighbour.NeighbourCalls > 0, "noisy neighbour %+v", r.Neighbour)
		check(r.Memory.PeakRSSBytes > 0 && r.Memory.PeakHeapLiveBytes > 0 && len(r.Memory.RSSTimeline) > 0, "memory %+v", r.Memory)
	}
	// nephele routes each node as it joins. (Upstream reconciles routes on a period, 5
	// minutes when tuned, so its routes may come after the tiny run.)
	for _, r := range runs {
		if r.Row == harness.RowNephele && (r.Init.Routes.Complete != scale.Nodes || r.FanOut.Routes.Complete != scale.FanOutNodes) {
			t.Errorf("nephele: routes %+v and %+v, want one per node", r.Init.Routes, r.FanOut.Routes)
		}
	}
	// Only the upstream default (one service worker) is held up by the hanging call.
	byRow := map[string]*results.Run{}
	for _, r := range runs {
		byRow[r.Row] = r
	}
	if hol := byRow[harness.RowUpstreamDefaults].HeadOfLine; hol.Max < scale.RequestTimeout.Seconds()/2 {
		t.Errorf("upstream defaults served the others in %.1fs although its one worker waits for the hung call (%s)", hol.Max, scale.RequestTimeout)
	}
	if hol := byRow[harness.RowNephele].HeadOfLine; hol.Max >= scale.RequestTimeout.Seconds() {
		t.Errorf("nephele served the others in %.1fs: they waited for the hung call", hol.Max)
	}

	var stdout, stderr bytes.Buffer
	if code := run([]string{"report", "-scale", scale.Name, "-out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("bench report = %d: %s", code, stderr.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## 1. Node initialization", "| nephele | upstream-tuned | upstream-defaults |", "![nodes initialized over time](init.png)"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"run", "-scale", "huge"}, {"run", "-rows", "kcm", "-scale", "tiny"},
		{"run", "-scale", "tiny", "-extra-flags", "--kube-api-qps=100"},
		{"run", "large"}, {"report", "-scale", "tiny", "large"}, {"report", "-scale", "tiny", "-rows", "nephele"},
		{"report", "-scale", "tiny", "-tag", "x", "-extra-flags", "--kube-api-qps=100"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Errorf("run(%q) = %d, want 2; stderr: %s", args, code, stderr.String())
		}
	}
}
