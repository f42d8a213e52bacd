package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Row names: the configurations the harness runs and the report compares.
const (
	RowNephele          = "nephele"
	RowUpstreamTuned    = "upstream-tuned"
	RowUpstreamDefaults = "upstream-defaults"
)

// Run is one configuration's pass through every scenario.
type Run struct {
	// Scale is the scale's name (tiny, small, large).
	Scale string `json:"scale"`
	// Row names the configuration: RowNephele, RowUpstreamTuned or RowUpstreamDefaults.
	Row string `json:"row"`
	// Impl is the controller implementation, nephele or upstream.
	Impl string `json:"impl"`
	// Description says what the row's configuration is.
	Description string `json:"description"`
	// Flags are the controller process's flags beyond the ones every row gets.
	Flags []string `json:"flags"`
	// Params are the scale and cloud settings the row ran with.
	Params Params `json:"params"`
	// Machine describes where it ran.
	Machine Machine `json:"machine"`
	// Started and Finished bound the run.
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`

	Init     Init     `json:"init"`
	Services Services `json:"services"`
	FanOut   FanOut   `json:"fanOut"`
	// FanOutCalm is the fan-out again after the steady window, once everything has
	// converged; nil in runs without it.
	FanOutCalm *FanOut    `json:"fanOutCalm,omitempty"`
	HeadOfLine HeadOfLine `json:"headOfLine"`
	Neighbour  Neighbour  `json:"neighbour"`
	Steady     Steady     `json:"steady"`
	Memory     Memory     `json:"memory"`
	Converged  Converged  `json:"converged"`

	// Problems are things that went wrong and may make numbers incomplete.
	Problems []string `json:"problems,omitempty"`
}

// Params are the settings of a run.
type Params struct {
	Nodes          int      `json:"nodes"`
	Services       int      `json:"services"`
	FanOutNodes    int      `json:"fanOutNodes"`
	HeadOfLine     int      `json:"headOfLine"`
	CloudLatency   Duration `json:"cloudLatency"`
	CloudRateLimit float64  `json:"cloudRateLimit"`
	CloudBurst     int      `json:"cloudBurst"`
	// MaxRouteChanges and RouteApplyCost are the cloud's batch of route changes: at
	// most that many changes in one routes.apply call, which takes RouteApplyCost
	// tokens of the quota. Zero in results from before the cloud offered it.
	MaxRouteChanges int `json:"maxRouteChanges,omitempty"`
	RouteApplyCost  int `json:"routeApplyCost,omitempty"`
	// RequestTimeout bounds one cloud request in both providers.
	RequestTimeout Duration `json:"requestTimeout"`
	// RouteWait bounds the wait for every node's route, and for load balancer calls to stop, before the steady window.
	RouteWait    Duration `json:"routeWait"`
	SteadyWindow Duration `json:"steadyWindow"`
	// OverlappedSteady is set when this row's steady-state window ran while other
	// rows ran their timed scenarios (to fit a scale's time budget).
	OverlappedSteady bool `json:"overlappedSteady"`
	// Profile names the cloud profile (latency and quota); empty is the default one.
	Profile string `json:"profile,omitempty"`
	// NeighbourQPS is the steady rate of the other client of the cloud account in
	// the noisy-neighbour scenario; NeighbourNodes and NeighbourServices join and are
	// created meanwhile.
	NeighbourQPS      float64 `json:"neighbourQPS,omitempty"`
	NeighbourNodes    int     `json:"neighbourNodes,omitempty"`
	NeighbourServices int     `json:"neighbourServices,omitempty"`
}

// Limit is the shortest time the cloud's quota allows for calls calls, at qps calls/s
// of the quota (the whole quota, or what another client leaves): the bucket's burst
// goes at once, the rest at the quota's rate, and the last call takes one latency.
func (p Params) Limit(calls int, qps float64) float64 {
	if calls <= 0 || qps <= 0 {
		return 0
	}
	return float64(max(0, calls-p.CloudBurst))/qps + p.CloudLatency.Seconds()
}

// RouteTokens is the least quota n new routes take: where the cloud batches, full
// batches of MaxRouteChanges at RouteApplyCost tokens each and the rest as one more
// batch or as single calls, whichever is cheaper (and never more than n single calls);
// else one token per route.
func (p Params) RouteTokens(n int) int {
	if n <= 0 {
		return 0
	}
	if p.MaxRouteChanges <= 0 {
		return n
	}
	// Full batches, then the rest as one more batch or as single calls, whichever is
	// cheaper.
	cost := max(1, p.RouteApplyCost)
	full, rest := n/p.MaxRouteChanges, n%p.MaxRouteChanges
	return min(n, full*cost+min(rest, cost))
}

// ConvergedTokens is the least quota the whole run's convergence takes (Converged): a
// listing of the account's instances for each burst (a page per 1,000), the routes of
// both bursts (RouteTokens), an ensure per Service and one backend update per load
// balancer for the fan-out.
func (p Params) ConvergedTokens() int {
	pages := func(n int) int { return (n + 999) / 1000 }
	return pages(p.Nodes) + p.RouteTokens(p.Nodes) + p.Services + pages(p.Nodes+p.FanOutNodes) + p.RouteTokens(p.FanOutNodes) + p.Services
}

// Machine describes the machine and its load.
type Machine struct {
	CPUs        int     `json:"cpus"`
	CPUModel    string  `json:"cpuModel"`
	MemoryBytes uint64  `json:"memoryBytes"`
	GoVersion   string  `json:"goVersion"`
	Kernel      string  `json:"kernel"`
	LoadBefore  float64 `json:"loadBefore"`
	LoadAfter   float64 `json:"loadAfter"`
}

// Point is one sample of a time series: T seconds after the scenario started.
type Point struct {
	T float64 `json:"t"`
	V float64 `json:"v"`
}

// Calls are cloud calls by operation (localcloud operation names) and HTTP status.
type Calls map[string]map[int]uint64

// Total is the number of calls of every operation.
func (c Calls) Total() uint64 {
	var n uint64
	for op := range c {
		n += c.Op(op)
	}
	return n
}

// Op is the number of calls of one operation.
func (c Calls) Op(op string) uint64 {
	var n uint64
	for _, v := range c[op] {
		n += v
	}
	return n
}

// Code is the number of calls of op answered with an HTTP status code.
func (c Calls) Code(op string, code int) uint64 { return c[op][code] }

// Throttled is the number of calls answered 429.
func (c Calls) Throttled() uint64 {
	var n uint64
	for _, codes := range c {
		n += codes[429]
	}
	return n
}

// Ops returns the operations with calls, sorted.
func (c Calls) Ops() []string {
	ops := make([]string, 0, len(c))
	for op := range c {
		if c.Op(op) > 0 {
			ops = append(ops, op)
		}
	}
	sort.Strings(ops)
	return ops
}

// Init is scenario 1: N nodes join at once.
type Init struct {
	Nodes int `json:"nodes"`
	// Initialized is how many were initialized before the deadline.
	Initialized int `json:"initialized"`
	// Seconds is the time from the first Node's creation to the last initialization;
	// with TimedOut, the deadline.
	Seconds  float64 `json:"seconds"`
	TimedOut bool    `json:"timedOut"`
	// Created is the time from the first Node's creation until the apiserver had
	// answered every create (the harness sends 32 at a time): the part of Seconds the
	// controllers cannot shorten. Nil in runs from before it was measured.
	Created *float64 `json:"created,omitempty"`
	// P50 and P99 are per-node times from the node's creation to its initialization.
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	// Calls are the cloud calls from the first creation to the end of the scenario.
	Calls Calls `json:"calls"`
	// Timeline is the number of initialized nodes over time.
	Timeline []Point `json:"timeline"`
	// Routes is when the nodes got their pod-network routes, whenever in the run.
	Routes Routes `json:"routes"`
}

// Routes is when a burst's nodes got their routes in the cloud.
type Routes struct {
	// Complete is how many of the burst's nodes had a route by the end of the run.
	Complete int `json:"complete"`
	// Seconds is the time from the burst until the last of them had its route; 0
	// unless every node got one.
	Seconds float64 `json:"seconds"`
}

// Services is the creation of the S LoadBalancer Services the later scenarios need.
type Services struct {
	Services int     `json:"services"`
	Ready    int     `json:"ready"`
	Seconds  float64 `json:"seconds"`
	TimedOut bool    `json:"timedOut"`
	// P50 and Max are per-Service times from creation to a load balancer ingress.
	P50   float64 `json:"p50"`
	Max   float64 `json:"max"`
	Calls Calls   `json:"calls"`
}

// Converged is the line that judges a whole run: the time from the init burst until
// every node of the init and fan-out bursts was initialized and had its route, every
// Service of the services scenario had its load balancer, and every load balancer held
// every fan-out node. The harness starts each scenario once the one before is done, so a
// row's own pace sets when the next burst comes.
type Converged struct {
	Seconds float64 `json:"seconds"`
	// Done is false when something had not converged by the end of the run; Missing
	// says what.
	Done    bool   `json:"done"`
	Missing string `json:"missing,omitempty"`
}

// FanOut is scenario 3: M nodes join while S load balancers exist.
type FanOut struct {
	Nodes         int `json:"nodes"`
	LoadBalancers int `json:"loadBalancers"`
	// Complete is how many load balancers got every new node before the deadline.
	Complete int `json:"complete"`
	// Seconds is the time from the first new Node to the last load balancer having
	// every new node (at its cloud address); with TimedOut, the deadline.
	Seconds  float64 `json:"seconds"`
	TimedOut bool    `json:"timedOut"`
	// Backend updates (lb.update) and ensures (lb.ensure) issued per load balancer
	// from the burst until the end of the quiet period after it.
	UpdatesMean float64 `json:"updatesMean"`
	UpdatesMax  int     `json:"updatesMax"`
	EnsuresMean float64 `json:"ensuresMean"`
	EnsuresMax  int     `json:"ensuresMax"`
	// Unchanged counts the backend updates, over every load balancer, that left the
	// load balancer's backend set as it was.
	Unchanged int   `json:"unchanged"`
	Calls     Calls `json:"calls"`
	// Timeline is the number of complete load balancers over time.
	Timeline []Point `json:"timeline"`
	// Routes is when the new nodes got their routes, whenever in the run.
	Routes Routes `json:"routes"`
}

// HeadOfLine is scenario 4: one load balancer's calls hang while K others are created.
type HeadOfLine struct {
	Others int `json:"others"`
	// Ready is how many of the others got a load balancer before the deadline.
	Ready int `json:"ready"`
	// Seconds is the time from the others' creation until the last got its load
	// balancer; with TimedOut, the deadline.
	Seconds  float64 `json:"seconds"`
	TimedOut bool    `json:"timedOut"`
	P50      float64 `json:"p50"`
	Max      float64 `json:"max"`
	// Held is how many calls for the hanging load balancer the cloud held.
	Held int `json:"held"`
	// Timeline is the number of others with a load balancer over time.
	Timeline []Point `json:"timeline"`
}

// Neighbour is the noisy-neighbour scenario: another client of the same cloud account
// sends a steady rate of calls while nodes join and Services are created.
type Neighbour struct {
	Nodes    int `json:"nodes"`
	Services int `json:"services"`
	// Initialized, Ready and Routed count the nodes initialized, the Services with a
	// load balancer and the nodes with a route by the end.
	Initialized int `json:"initialized"`
	Ready       int `json:"ready"`
	Routed      int `json:"routed"`
	// Seconds is the time from the burst until the last of those (all three kinds),
	// or, when not Complete, until the harness stopped waiting; InitSeconds,
	// ServicesSeconds and RoutesSeconds are each kind's own (RoutesSeconds is the
	// wait's end when some node got no route). TimedOut says nodes or load balancers
	// were not all done in time; routes are waited for a shorter while, and a
	// controller that creates them only on its period may leave some missing.
	Seconds         float64 `json:"seconds"`
	InitSeconds     float64 `json:"initSeconds"`
	ServicesSeconds float64 `json:"servicesSeconds"`
	RoutesSeconds   float64 `json:"routesSeconds"`
	TimedOut        bool    `json:"timedOut"`
	Complete        bool    `json:"complete"`
	// NeighbourCalls and NeighbourThrottled are the other client's calls and how many
	// of them the cloud answered 429.
	NeighbourCalls     int `json:"neighbourCalls"`
	NeighbourThrottled int `json:"neighbourThrottled"`
	// Calls are the controllers' cloud calls meanwhile (the neighbour's left out).
	Calls Calls `json:"calls"`
}

// ThrottledShare returns the share of the neighbour's calls that were throttled.
func (n Neighbour) ThrottledShare() float64 {
	if n.NeighbourCalls == 0 {
		return 0
	}
	return float64(n.NeighbourThrottled) / float64(n.NeighbourCalls)
}

// ThrottledShare returns the share of calls answered 429.
func (c Calls) ThrottledShare() float64 {
	if t := c.Total(); t > 0 {
		return float64(c.Throttled()) / float64(t)
	}
	return 0
}

// Steady is scenarios 2 and 6: calls over a quiet window.
type Steady struct {
	Nodes    int     `json:"nodes"`
	Services int     `json:"services"`
	Seconds  float64 `json:"seconds"`
	Calls    Calls   `json:"calls"`
	// RoutesWaitSeconds is how long the harness waited, before the quiet period, for
	// every node to have its route and for load balancer calls to stop.
	RoutesWaitSeconds float64 `json:"routesWaitSeconds"`
	// RoutesMissing is how many nodes still had no route when the window began: a
	// controller still catching up, whose route creations in the window are not
	// recurring cost.
	RoutesMissing int `json:"routesMissing"`
	// LBCallsBeforeWindow is how many load balancer calls (ensures and backend
	// updates) were issued in the quiet period just before the window: 0 once the
	// bursts' backend updates have drained. More means the wait ran to its bound:
	// updates still draining, or a controller whose recurring load balancer calls come
	// more often than the quiet period (its window shows which). Nil in results from
	// before the harness waited for them, and when it did not wait (no RouteWait).
	LBCallsBeforeWindow *int `json:"lbCallsBeforeWindow,omitempty"`
}

// CatchUpOp is the operation that a converged controller never calls in steady state:
// every route it creates during the window is one it had not managed to create yet.
const CatchUpOp = "routes.create"

// Recurring returns the window's calls without route creations (see CatchUpOp).
func (s Steady) Recurring() Calls {
	out := Calls{}
	for op, codes := range s.Calls {
		if op != CatchUpOp {
			out[op] = codes
		}
	}
	return out
}

// PerNodeHour returns op's calls per node per hour; "" means every recurring call,
// that is, all but route creations.
func (s Steady) PerNodeHour(op string) float64 {
	if s.Nodes == 0 || s.Seconds == 0 {
		return 0
	}
	n := s.Recurring().Total()
	if op != "" {
		n = s.Calls.Op(op)
	}
	return float64(n) / float64(s.Nodes) * 3600 / s.Seconds
}

// PerHour returns the calls per hour of the operations with prefix ("routes.").
func (s Steady) PerHour(prefix string) float64 {
	if s.Seconds == 0 {
		return 0
	}
	var n uint64
	for _, op := range s.Calls.Ops() {
		if strings.HasPrefix(op, prefix) {
			n += s.Calls.Op(op)
		}
	}
	return float64(n) * 3600 / s.Seconds
}

// Memory is scenario 5: the controller process's memory over the whole run.
type Memory struct {
	// PeakRSSBytes is the kernel's high-water mark of the process's resident set
	// (VmHWM in /proc/PID/status).
	PeakRSSBytes uint64 `json:"peakRSSBytes"`
	// PeakHeapLiveBytes is the largest live heap after a GC the process sampled.
	PeakHeapLiveBytes uint64 `json:"peakHeapLiveBytes"`
	// PeakHeapObjectsBytes is the largest heap (objects, live or not yet swept).
	PeakHeapObjectsBytes uint64 `json:"peakHeapObjectsBytes"`
	// PeakGoTotalBytes is the largest memory the Go runtime had mapped.
	PeakGoTotalBytes uint64 `json:"peakGoTotalBytes"`
	PeakGoroutines   uint64 `json:"peakGoroutines"`
	// RSSTimeline is the resident set in MiB over the run.
	RSSTimeline []Point `json:"rssTimeline"`
	// CPUSeconds is the user+system CPU time the process used.
	CPUSeconds float64 `json:"cpuSeconds"`
}

// Duration is a time.Duration written as a string ("50ms").
type Duration struct{ time.Duration }

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	d.Duration = v
	return nil
}

// FileName is the name of a run's file in its scale's directory.
func FileName(row string) string { return row + ".json" }

// Save writes run to dir/<row>.json. It writes a temporary file in dir and renames it
// over the old one, so the file is always either the old run or the new one, whole.
func Save(dir string, run *Run) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("saving results: %w", err)
	}
	b, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		return fmt.Errorf("saving results of %s: %w", run.Row, err)
	}
	if err := writeFileAtomic(filepath.Join(dir, FileName(run.Row)), append(b, '\n')); err != nil {
		return fmt.Errorf("saving results of %s: %w", run.Row, err)
	}
	return nil
}

// writeFileAtomic writes b to a temporary file next to path (its name does not end in
// .json, so LoadDir never reads it) and renames it to path.
func writeFileAtomic(path string, b []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(b); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// LoadDir reads every run file in dir, ordered by row name. A file whose run is not
// the row its name says (FileName(run.Row)), or that cannot be read, is skipped: LoadDir
// returns the other runs with an error naming each skipped file. If the runs are of
// different scales, it returns no runs and an error.
func LoadDir(dir string) ([]*Run, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("loading results: %w", err)
	}
	var runs []*Run
	var skipped []error
	for _, p := range paths {
		r, err := load(p)
		if err != nil {
			skipped = append(skipped, fmt.Errorf("loading results: skipped %s: %w", p, err))
			continue
		}
		runs = append(runs, r)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Row < runs[j].Row })
	for _, r := range runs[min(1, len(runs)):] {
		if r.Scale != runs[0].Scale {
			return nil, fmt.Errorf("loading results from %s: row %s is of scale %q and row %s of scale %q",
				dir, runs[0].Row, runs[0].Scale, r.Row, r.Scale)
		}
	}
	return runs, errors.Join(skipped...)
}

// load reads one run file.
func load(path string) (*Run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if want := FileName(r.Row); filepath.Base(path) != want {
		return nil, fmt.Errorf("it holds row %q, whose file is %s", r.Row, want)
	}
	return &r, nil
}
