package results

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
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
