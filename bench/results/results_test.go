package results

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCalls(t *testing.T) {
	c := Calls{
		"instances.get": {200: 10, 429: 2},
		"routes.list":   {200: 3},
		"lb.get":        {},
	}
	if c.Total() != 15 || c.Op("instances.get") != 12 || c.Throttled() != 2 {
		t.Fatalf("Total %d, Op %d, Throttled %d", c.Total(), c.Op("instances.get"), c.Throttled())
	}
	if got := c.Ops(); !slices.Equal(got, []string{"instances.get", "routes.list"}) {
		t.Fatalf("Ops = %v: operations without calls must be left out", got)
	}
}

func TestSteadyRates(t *testing.T) {
	s := Steady{Nodes: 200, Seconds: 300, Calls: Calls{"instances.get": {200: 200}, "routes.list": {200: 30}}}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	s.Calls["routes.create"] = map[int]uint64{201: 50, 429: 100}
	if got := s.PerNodeHour(""); !near(got, 230.0/200*12) {
		t.Errorf("PerNodeHour = %v", got)
	}
	if got := s.PerNodeHour("instances.get"); !near(got, 12) {
		t.Errorf("PerNodeHour(instances.get) = %v", got)
	}
	if got := s.PerNodeHour("routes.create"); !near(got, 150.0/200*12) {
		t.Errorf("PerNodeHour(routes.create) = %v", got)
	}
	if got := s.PerHour("routes.list"); !near(got, 360) {
		t.Errorf("PerHour(routes.) = %v", got)
	}
	if got := (Steady{}).PerNodeHour(""); got != 0 {
		t.Errorf("an empty window gives %v, want 0", got)
	}
}

func TestSaveAndLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "small")
	runs := []*Run{
		{Scale: "small", Row: "upstream-defaults", Params: Params{CloudLatency: Duration{50 * time.Millisecond}}},
		{Scale: "small", Row: "nephele", Init: Init{Nodes: 3, Calls: Calls{"instances.list": {200: 1}}}},
	}
	for _, r := range runs {
		if err := Save(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	// Files other than results are not read.
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte("# x"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Row != "nephele" || got[1].Row != "upstream-defaults" {
		t.Fatalf("loaded %d runs in the wrong order", len(got))
	}
	if got[0].Init.Calls.Op("instances.list") != 1 || got[1].Params.CloudLatency.Duration != 50*time.Millisecond {
		t.Fatalf("loaded runs differ: %+v %+v", got[0].Init, got[1].Params)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDir(dir); err == nil {
		t.Fatal("LoadDir accepted a broken file")
	}
}

func TestDurationJSON(t *testing.T) {
	b, err := json.Marshal(Duration{1500 * time.Millisecond})
	if err != nil || string(b) != `"1.5s"` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var d Duration
	if err := json.Unmarshal([]byte(`"5m10s"`), &d); err != nil || d.Duration != 5*time.Minute+10*time.Second {
		t.Fatalf("Unmarshal = %v, %v", d, err)
	}
	for _, bad := range []string{`5`, `"fast"`} {
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", bad)
		}
	}
}

func TestSaveReplacesTheFileWhole(t *testing.T) {
	dir := t.TempDir()
	if err := Save(dir, &Run{Scale: "small", Row: "nephele", Description: "first"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName("nephele"))
	// A link to the first file stands for a reader that has it open: a Save that
	// truncates and rewrites the file in place (and, interrupted, leaves it cut short)
	// changes what the link sees; one that renames a complete new file over it does not.
	old := filepath.Join(t.TempDir(), "old.json")
	if err := os.Link(path, old); err != nil {
		t.Skipf("hard links: %v", err)
	}
	if err := Save(dir, &Run{Scale: "small", Row: "nephele", Description: "second"}); err != nil {
		t.Fatal(err)
	}
	var before, after Run
	for p, r := range map[string]*Run{old: &before, path: &after} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, r); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	if before.Description != "first" || after.Description != "second" {
		t.Fatalf("the old file reads %q and the new %q: Save rewrote the file in place", before.Description, after.Description)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("Save left %d files, want only %s", len(entries), FileName("nephele"))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("the saved file: %v, %v; want mode 0644", fi, err)
	}
}

func TestLoadDirSkipsMisnamedFiles(t *testing.T) {
	dir := t.TempDir()
	for _, r := range []*Run{{Scale: "large", Row: "nephele"}, {Scale: "large", Row: "upstream-tuned"}} {
		if err := Save(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	// A copy kept under another name would be a second nephele row.
	b, err := os.ReadFile(filepath.Join(dir, FileName("nephele")))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nephele-old.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	runs, err := LoadDir(dir)
	if err == nil || !strings.Contains(err.Error(), "nephele-old.json") {
		t.Fatalf("LoadDir = %v, want an error naming nephele-old.json", err)
	}
	if len(runs) != 2 || runs[0].Row != "nephele" || runs[1].Row != "upstream-tuned" {
		t.Fatalf("LoadDir loaded %d runs, want the two whose file names match their rows", len(runs))
	}
}

func TestLoadDirRefusesMixedScales(t *testing.T) {
	dir := t.TempDir()
	for _, r := range []*Run{{Scale: "large", Row: "nephele"}, {Scale: "small", Row: "upstream-tuned"}} {
		if err := Save(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	if runs, err := LoadDir(dir); err == nil || !strings.Contains(err.Error(), "small") || !strings.Contains(err.Error(), "large") {
		t.Fatalf("LoadDir = %d runs, %v; want an error naming both scales", len(runs), err)
	}
}

func TestRowNames(t *testing.T) {
	if RowNephele != "nephele" || RowUpstreamTuned != "upstream-tuned" || RowUpstreamDefaults != "upstream-defaults" {
		t.Fatalf("row names %q %q %q changed: the committed results are named after them", RowNephele, RowUpstreamTuned, RowUpstreamDefaults)
	}
	// The committed results load, one run per row, named after these constants.
	for dir, want := range map[string][]string{
		"small":                 {RowNephele, RowUpstreamDefaults, RowUpstreamTuned},
		"large":                 {RowNephele, RowUpstreamDefaults, RowUpstreamTuned},
		"large-tuned-unlimited": {RowUpstreamTuned},
	} {
		runs, err := LoadDir(dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		var rows []string
		for _, r := range runs {
			rows = append(rows, r.Row)
		}
		if !slices.Equal(rows, want) {
			t.Errorf("%s holds rows %q, want %q", dir, rows, want)
		}
	}
}

func TestParamsLimit(t *testing.T) {
	p := Params{CloudRateLimit: 50, CloudBurst: 50, CloudLatency: Duration{50 * time.Millisecond}}
	tests := []struct {
		name  string
		calls int
		qps   float64
		want  float64
	}{
		{name: "no calls", calls: 0, qps: 50, want: 0},
		{name: "within the burst: one latency", calls: 10, qps: 50, want: 0.05},
		{name: "5,000 routes at 50/s", calls: 5000, qps: 50, want: 99.05},
		{name: "what a neighbour leaves", calls: 1050, qps: 30, want: 1000.0/30 + 0.05},
		{name: "no quota left", calls: 10, qps: 0, want: 0},
	}
	for _, tt := range tests {
		if got := p.Limit(tt.calls, tt.qps); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: Limit(%d, %v) = %v, want %v", tt.name, tt.calls, tt.qps, got, tt.want)
		}
	}
}

func TestRouteTokens(t *testing.T) {
	batch := Params{MaxRouteChanges: 500, RouteApplyCost: 10}
	for _, tt := range []struct {
		p    Params
		n    int
		want int
	}{
		{Params{}, 5000, 5000},                  // no batch: a token a route
		{batch, 0, 0},                           // nothing to do
		{batch, 3, 3},                           // fewer singles than one batch's cost
		{batch, 20, 10},                         // one batch
		{batch, 5000, 100},                      // ten full batches
		{batch, 501, 11},                        // a full batch and one single
		{batch, 519, 20},                        // a full batch and the rest as a batch
		{Params{MaxRouteChanges: 500}, 1000, 2}, // cost 0 counts as 1
	} {
		if got := tt.p.RouteTokens(tt.n); got != tt.want {
			t.Errorf("%+v.RouteTokens(%d) = %d, want %d", tt.p, tt.n, got, tt.want)
		}
	}
}
