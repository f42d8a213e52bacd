package harness

import (
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nephele-dev/nephele/bench/ccm"
	"github.com/nephele-dev/nephele/bench/results"
	"github.com/nephele-dev/nephele/manager"
)

// Scale sets the sizes and time limits of a run.
type Scale struct {
	// Name identifies the scale in results.
	Name string
	// Nodes (N) join at once in the init scenario.
	Nodes int
	// Services (S) LoadBalancer Services exist during the fan-out scenario.
	Services int
	// FanOutNodes (M) join in the fan-out burst.
	FanOutNodes int
	// HeadOfLine (K) Services are created behind the hanging one.
	HeadOfLine int
	// CloudLatency is added to every cloud call.
	CloudLatency time.Duration
	// CloudQPS and CloudBurst are the cloud's account-wide rate limit.
	CloudQPS   float64
	CloudBurst int
	// RouteApplyCost is how many tokens of the quota one routes.apply call takes (up
	// to api.MaxRouteChanges route changes), where a single route call takes one.
	RouteApplyCost int
	// Profile names the cloud profile that set CloudLatency, CloudQPS and CloudBurst;
	// empty is the default profile.
	Profile string
	// NeighbourQPS is the steady rate of another client of the same cloud account
	// during the noisy-neighbour scenario, in which NeighbourNodes join and
	// NeighbourServices are created at once; 0 nodes and Services skip it.
	NeighbourQPS      float64
	NeighbourNodes    int
	NeighbourServices int
	// RequestTimeout bounds one cloud request in both providers (their cloud config's
	// requestTimeout), and so how long a hanging call holds its caller.
	RequestTimeout time.Duration
	// SteadyWindow is how long steady-state calls are counted. It should be at least
	// the longest period of any controller's loop (5m node status updates): a window
	// of exactly one period counts each periodic loop's calls once whatever its phase.
	SteadyWindow time.Duration
	// RouteWait bounds the wait, before the steady window, for every node to have its
	// route; 0 skips it. Route creations in the window are reported apart from the
	// recurring calls either way.
	RouteWait time.Duration
	// Settle is the quiet time before the steady window and the quiet period that ends
	// the fan-out count.
	Settle time.Duration
	// Timeout bounds each timed scenario; a scenario not done by then is reported as
	// timed out with what it reached.
	Timeout time.Duration
	// OverlapSteady runs a row's steady window in the background while the next rows
	// run their timed scenarios, so three windows cost the time of one.
	OverlapSteady bool
}

// Scales returns the predefined scales by name.
func Scales() map[string]Scale {
	base := Scale{CloudLatency: 50 * time.Millisecond, CloudQPS: 50, CloudBurst: 50, RouteApplyCost: DefaultRouteApplyCost,
		RequestTimeout: 30 * time.Second, NeighbourQPS: 20}
	tiny, small, large := base, base, base
	tiny.NeighbourQPS, tiny.NeighbourNodes, tiny.NeighbourServices = 5, 2, 1
	small.NeighbourNodes, small.NeighbourServices = 100, 25
	large.NeighbourNodes, large.NeighbourServices = 1000, 200
	// tiny checks that the harness works end to end, in well under a minute per row.
	tiny.Name, tiny.Nodes, tiny.Services, tiny.FanOutNodes, tiny.HeadOfLine = "tiny", 3, 2, 2, 2
	tiny.SteadyWindow, tiny.Settle, tiny.Timeout = 5*time.Second, time.Second, 2*time.Minute
	tiny.RequestTimeout = 5 * time.Second
	small.Name, small.Nodes, small.Services, small.FanOutNodes, small.HeadOfLine = "small", 200, 50, 20, 10
	small.SteadyWindow, small.Settle, small.Timeout = 5*time.Minute+10*time.Second, 10*time.Second, 4*time.Minute
	small.OverlapSteady, small.RouteWait = true, time.Minute
	large.Name, large.Nodes, large.Services, large.FanOutNodes, large.HeadOfLine = "large", 5000, 1000, 100, 50
	large.SteadyWindow, large.Settle, large.Timeout = 10*time.Minute, 20*time.Second, 15*time.Minute
	large.RouteWait = 3 * time.Minute
	return map[string]Scale{"tiny": tiny, "small": small, "large": large}
}

// Profile is a cloud's speed and quota: the latency of every call, the account-wide
// rate limit, and what a batch of route changes costs of it.
type Profile struct {
	Latency time.Duration
	QPS     float64
	Burst   int
	// RouteApplyCost is Scale.RouteApplyCost.
	RouteApplyCost int
}

// DefaultRouteApplyCost is what one routes.apply call costs of the quota in both
// profiles: a route table replaced whole is a heavier write than one route, as ten.
const DefaultRouteApplyCost = 10

// DefaultProfile is the profile a scale has unless another is asked for.
const DefaultProfile = "default"

// Profiles returns the cloud profiles by name: the default (50 ms calls, 50 calls/s)
// and "slow" (100 ms calls, 25 calls/s), so that results do not hang on one tuned point.
func Profiles() map[string]Profile {
	return map[string]Profile{
		DefaultProfile: {Latency: 50 * time.Millisecond, QPS: 50, Burst: 50, RouteApplyCost: DefaultRouteApplyCost},
		"slow":         {Latency: 100 * time.Millisecond, QPS: 25, Burst: 25, RouteApplyCost: DefaultRouteApplyCost},
	}
}

// WithProfile returns s with the cloud profile called name.
func (s Scale) WithProfile(name string) (Scale, error) {
	p, ok := Profiles()[name]
	if !ok {
		names := make([]string, 0, len(Profiles()))
		for n := range Profiles() {
			names = append(names, n)
		}
		sort.Strings(names)
		return Scale{}, fmt.Errorf("unknown cloud profile %q: want one of %s", name, strings.Join(names, ", "))
	}
	s.CloudLatency, s.CloudQPS, s.CloudBurst, s.RouteApplyCost = p.Latency, p.QPS, p.Burst, p.RouteApplyCost
	s.Profile = ""
	if name != DefaultProfile {
		s.Profile = name
	}
	return s, nil
}

// ScaleNamed returns the predefined scale called name.
func ScaleNamed(name string) (Scale, error) {
	s, ok := Scales()[name]
	if !ok {
		names := make([]string, 0, len(Scales()))
		for n := range Scales() {
			names = append(names, n)
		}
		sort.Strings(names)
		return Scale{}, fmt.Errorf("unknown scale %q: want one of %s", name, strings.Join(names, ", "))
	}
	return s, nil
}

// Row is one controller configuration.
type Row struct {
	// Name identifies the row in results.
	Name string
	// Description says what the configuration is, for the report.
	Description string
	// Impl is the controller implementation.
	Impl ccm.Impl
	// Flags are added to the flags every row gets.
	Flags []string
}

// Row names, as the results and the report know them.
const (
	RowNephele          = results.RowNephele
	RowUpstreamTuned    = results.RowUpstreamTuned
	RowUpstreamDefaults = results.RowUpstreamDefaults
)

// Rows returns the three configurations in the order they run. Upstream runs first, so
// that whatever load an earlier row's steady window adds falls on nephele's timed
// scenarios, not on upstream's; upstream tuned runs first of all because its steady
// window waits longest (for its 5-minute route reconciliation to create the routes).
func Rows() []Row {
	return []Row{
		{
			Name:        RowUpstreamTuned,
			Description: "k8s.io/cloud-provider v0.36.3 controllers (app package) with nephele's values for every knob both have, except the apiserver client limit: upstream's 20/s, which its route controller needs",
			Impl:        ccm.Upstream,
			Flags:       TunedFlags(),
		},
		{
			Name:        RowUpstreamDefaults,
			Description: "k8s.io/cloud-provider v0.36.3 controllers (app package) at their defaults",
			Impl:        ccm.Upstream,
		},
		{
			Name:        RowNephele,
			Description: "nephele's manager and controllers with providers/local, at nephele's defaults",
			Impl:        ccm.Nephele,
		},
	}
}

// RowsNamed returns the rows with the given names, in Rows' order.
func RowsNamed(names []string) ([]Row, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []Row
	for _, r := range Rows() {
		if want[r.Name] {
			out = append(out, r)
			delete(want, r.Name)
		}
	}
	if len(want) > 0 {
		var unknown []string
		for n := range want {
			unknown = append(unknown, n)
		}
		sort.Strings(unknown)
		return nil, fmt.Errorf("unknown rows %s: want %s, %s or %s", strings.Join(unknown, ", "), RowNephele, RowUpstreamTuned, RowUpstreamDefaults)
	}
	return out, nil
}

// TunedFlags are nephele's defaults for every flag the upstream cloud-controller-manager
// also has, read from nephele's manager so they cannot drift from it, with one exception:
// --kube-api-qps and --kube-api-burst stay at upstream's 20 and 30. nephele's -1 (no
// client-side limit) is safe for nephele, whose controllers bound their writes by their
// workers, but not for upstream: its route controller patches every Node's
// NetworkUnavailable condition from a goroutine of its own on each reconciliation and
// relies on the client-side limit to pace them. With -1 at the large scale it saturated
// the apiserver until its own lease renewal timed out and it exited
// (results/large-tuned-unlimited).
func TunedFlags() []string {
	o := manager.NewOptions()
	d := func(v time.Duration) string { return v.String() }
	return []string{
		"--concurrent-service-syncs=" + strconv.Itoa(o.ConcurrentServiceSyncs),
		"--concurrent-node-syncs=" + strconv.Itoa(o.ConcurrentNodeSyncs),
		"--node-status-update-frequency=" + d(o.NodeStatusUpdateFrequency),
		"--route-reconciliation-period=" + d(o.RouteReconciliationPeriod),
		"--node-monitor-period=" + d(o.NodeMonitorPeriod),
		"--kube-api-qps=" + strconv.FormatFloat(float64(upstreamKubeAPIQPS), 'f', -1, 32),
		"--kube-api-burst=" + strconv.Itoa(upstreamKubeAPIBurst),
		"--min-resync-period=" + d(o.MinResyncPeriod),
	}
}

// Upstream's default apiserver client limit, which the tuned row keeps (see TunedFlags).
const (
	upstreamKubeAPIQPS   = 20
	upstreamKubeAPIBurst = 30
)

// Config configures a harness run.
type Config struct {
	// Scale is the sizes and time limits.
	Scale Scale
	// Rows are the configurations to run, in order.
	Rows []Row
	// OutDir receives one results file per row.
	OutDir string
	// ControllerCommand returns the command of a controller process for impl: one that
	// calls ccm.Main with args (bench/cmd/ccm-nephele or ccm-upstream, so that the
	// process carries that implementation alone, or a test binary).
	ControllerCommand func(impl ccm.Impl, args []string) *exec.Cmd
	// BinDir is where the control plane binaries are; empty means controlplane.BinDir.
	BinDir string
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
}
