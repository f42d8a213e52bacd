package harness

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"

	"github.com/nephele-dev/nephele/manager"
)

func TestPodCIDRAndVIPPool(t *testing.T) {
	for i, want := range map[int]string{0: "100.64.0.0/24", 1: "100.64.1.0/24", 255: "100.64.255.0/24", 256: "100.65.0.0/24", 5101: "100.83.237.0/24"} {
		if got := podCIDR(i); got != want {
			t.Errorf("podCIDR(%d) = %s, want %s", i, got, want)
		}
	}
	if a, b := vipPool(0), vipPool(1); a.String() != "127.150.0.0/16" || b.String() != "127.151.0.0/16" {
		t.Errorf("vipPool(0), vipPool(1) = %s, %s", a, b)
	}
}

func TestTimelineAndLatencies(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	pts := timeline(start, []time.Time{at(3), at(1), at(2)})
	if len(pts) != 4 || pts[0].V != 0 || pts[1].T != 1 || pts[3].T != 3 || pts[3].V != 3 {
		t.Fatalf("timeline = %+v", pts)
	}
	sent := map[string]time.Time{"a": at(0), "b": at(0), "c": at(1), "d": at(1)}
	done := map[string]time.Time{"a": at(1), "b": at(4), "c": at(2), "x": at(9)}
	p50, p99, highest := latencies(sent, done)
	if p50 != 1 || p99 != 4 || highest != 4 {
		t.Fatalf("latencies = %v, %v, %v; want 1, 4, 4", p50, p99, highest)
	}
	if p50, _, _ := latencies(sent, nil); p50 != 0 {
		t.Fatalf("latencies without results = %v", p50)
	}
	if got := last(done); !got.Equal(at(9)) {
		t.Fatalf("last = %v", got)
	}
}

// TestTunedFlags checks that both implementations accept the tuned flags and that they
// carry nephele's defaults into upstream's configuration.
func TestTunedFlags(t *testing.T) {
	neph := pflag.NewFlagSet("nephele", pflag.ContinueOnError)
	no := manager.NewOptions()
	no.AddFlags(neph)
	if err := neph.Parse(TunedFlags()); err != nil {
		t.Fatalf("nephele's manager refuses the tuned flags: %v", err)
	}

	up, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("upstream", pflag.ContinueOnError)
	named := up.Flags(app.ControllerNames(app.DefaultInitFuncConstructors), app.ControllersDisabledByDefault.List(),
		names.CCMControllerAliases(), app.AllWebhooks, app.DisabledByDefaultWebhooks)
	for _, f := range named.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(TunedFlags()); err != nil {
		t.Fatalf("upstream's cloud-controller-manager refuses the tuned flags: %v", err)
	}
	d := manager.NewOptions()
	if got := up.ServiceController.ConcurrentServiceSyncs; int(got) != d.ConcurrentServiceSyncs {
		t.Errorf("upstream concurrent service syncs = %d, want nephele's %d", got, d.ConcurrentServiceSyncs)
	}
	if got := up.KubeCloudShared.RouteReconciliationPeriod.Duration; got != d.RouteReconciliationPeriod {
		t.Errorf("upstream route reconciliation period = %s, want nephele's %s", got, d.RouteReconciliationPeriod)
	}
	if got := up.NodeStatusUpdateFrequency.Duration; got != d.NodeStatusUpdateFrequency {
		t.Errorf("upstream node status update frequency = %s, want nephele's %s", got, d.NodeStatusUpdateFrequency)
	}
	// The one knob that keeps upstream's value: see TunedFlags.
	if got := up.Generic.ClientConnection; got.QPS != upstreamKubeAPIQPS || got.Burst != upstreamKubeAPIBurst {
		t.Errorf("upstream apiserver client limit = %v/%d, want upstream's %d/%d", got.QPS, got.Burst, upstreamKubeAPIQPS, upstreamKubeAPIBurst)
	}
}

func TestRowsAndScales(t *testing.T) {
	rows, err := RowsNamed([]string{RowNephele, RowUpstreamDefaults})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Name != RowUpstreamDefaults || rows[1].Name != RowNephele {
		t.Fatalf("RowsNamed keeps Rows' order: got %v", rows)
	}
	if _, err := RowsNamed([]string{"nephele", "kcm"}); err == nil || !strings.Contains(err.Error(), "kcm") {
		t.Fatalf("RowsNamed with an unknown row: %v", err)
	}
	for _, r := range Rows() {
		if r.Name == RowUpstreamTuned && !slices.Equal(r.Flags, TunedFlags()) {
			t.Errorf("the tuned row's flags %v are not TunedFlags", r.Flags)
		}
	}
	for name, s := range Scales() {
		if s.Name != name || s.Nodes <= 0 || s.Services <= 0 || s.FanOutNodes <= 0 || s.HeadOfLine <= 0 ||
			s.SteadyWindow <= 0 || s.Timeout <= 0 || s.RequestTimeout <= 0 || s.CloudQPS <= 0 {
			t.Errorf("scale %s is incomplete: %+v", name, s)
		}
	}
	if s, _ := ScaleNamed("small"); s.Nodes != 200 || s.Services != 50 || s.FanOutNodes != 20 {
		t.Errorf("small = %+v, want N=200 S=50 M=20", s)
	}
	if s, _ := ScaleNamed("large"); s.Nodes != 5000 || s.Services != 1000 || s.FanOutNodes != 100 {
		t.Errorf("large = %+v, want N=5000 S=1000 M=100", s)
	}
	if _, err := ScaleNamed("huge"); err == nil {
		t.Error("ScaleNamed accepted an unknown scale")
	}
}
