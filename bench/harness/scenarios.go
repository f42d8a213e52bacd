package harness

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nephele-dev/nephele/bench/results"
)

// scenarioInit: N nodes join at once; time until all are initialized.
func (r *rowRun) scenarioInit(ctx context.Context) error {
	out := &r.res.Init
	out.Nodes = len(r.nodes)
	if err := r.addInstances(ctx, r.nodes); err != nil {
		return err
	}
	before, err := r.w.calls(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	r.initStart = start
	sent, err := createNodes(ctx, r.w.kube, r.nodes, r.cidrs, r.addrs)
	if err != nil {
		return err
	}
	created := time.Since(start).Seconds()
	out.Created = &created
	r.allNodes += len(r.nodes)
	werr := r.waitFor(ctx, r.s.Timeout, func() bool { return r.trk.allInitialized(r.nodes) })
	done := r.trk.initialized(r.nodes)
	after, err := r.w.calls(ctx)
	if err != nil {
		return err
	}
	out.Calls = results.Calls(after.Since(before))
	out.Initialized = len(done)
	out.Timeline = timeline(start, slices.Collect(maps.Values(done)))
	out.P50, out.P99, _ = latencies(sent, done)
	if werr != nil {
		out.TimedOut = true
		out.Seconds = time.Since(start).Seconds()
		return fmt.Errorf("%d of %d nodes initialized: %w", len(done), len(r.nodes), werr)
	}
	out.Seconds = last(done).Sub(start).Seconds()
	r.logf("init: %d nodes in %.1fs (created in %.1fs), %d cloud calls", len(done), out.Seconds, created, out.Calls.Total())
	return nil
}

// scenarioServices: S LoadBalancer Services are created; time until each has a VIP.
func (r *rowRun) scenarioServices(ctx context.Context) error {
	out := &r.res.Services
	out.Services = r.s.Services
	names := make([]string, r.s.Services)
	for i := range names {
		names[i] = fmt.Sprintf("svc-%05d", i)
	}
	before, err := r.w.calls(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	r.servicesStart = start
	sent, lbNames, err := createServices(ctx, r.w.kube, names)
	if err != nil {
		return err
	}
	r.allServices += len(names)
	r.services = slices.Sorted(maps.Keys(lbNames))
	maps.Copy(r.lbNames, lbNames)
	werr := r.waitFor(ctx, r.s.Timeout, func() bool { return r.trk.allReady(r.services) })
	done := r.trk.ready(r.services)
	after, err := r.w.calls(ctx)
	if err != nil {
		return err
	}
	out.Calls = results.Calls(after.Since(before))
	out.Ready = len(done)
	out.P50, _, out.Max = latencies(sent, done)
	if werr != nil {
		out.TimedOut = true
		out.Seconds = time.Since(start).Seconds()
		return fmt.Errorf("%d of %d services got a load balancer: %w", len(done), len(names), werr)
	}
	out.Seconds = last(done).Sub(start).Seconds()
	r.logf("services: %d load balancers in %.1fs", len(done), out.Seconds)
	return nil
}

// scenarioFanOut: M nodes join in a burst while S load balancers exist; backend updates
// issued per load balancer, and time until every load balancer has every new node at its
// address.
func (r *rowRun) scenarioFanOut(ctx context.Context) error {
	return r.fanOut(ctx, "fan-out", &r.res.FanOut, r.fanNodes, r.fanCIDRs, &r.fanStart)
}

// scenarioFanOutCalm is the fan-out again once everything has converged: M more nodes
// join while no route or load balancer work is left over from the bursts before.
func (r *rowRun) scenarioFanOutCalm(ctx context.Context) error {
	r.logf("scenario fan-out after convergence")
	r.res.FanOutCalm = &results.FanOut{}
	if err := r.fanOut(ctx, "fan-out after convergence", r.res.FanOutCalm, r.calmNodes, r.calmCIDRs, &r.calmStart); err != nil {
		return err
	}
	// Its routes are in section 6: give them the route wait, as the steady state does.
	if err := r.waitFor(ctx, r.s.RouteWait, func() bool { return r.routesMissing(r.calmCIDRs) == 0 }); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

// fanOut runs a fan-out of nodes (with their pod CIDRs) into out, recording its start.
func (r *rowRun) fanOut(ctx context.Context, what string, out *results.FanOut, nodes, cidrs []string, started *time.Time) error {
	out.Nodes, out.LoadBalancers = len(nodes), len(r.services)
	if len(r.services) == 0 {
		return fmt.Errorf("no load balancers to fan out to")
	}
	if err := r.addInstances(ctx, nodes); err != nil {
		return err
	}
	want := make(map[string]string, len(nodes))
	for _, n := range nodes {
		want[n] = r.addrs[n]
	}
	lbs := make([]string, 0, len(r.services))
	for _, k := range r.services {
		lbs = append(lbs, r.lbNames[k])
	}
	before := r.w.tap.Counts()
	beforeCalls, err := r.w.calls(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	*started = start
	if _, err := createNodes(ctx, r.w.kube, nodes, cidrs, r.addrs); err != nil {
		return err
	}
	r.allNodes += len(nodes)

	complete := map[string]time.Time{}
	werr := r.waitFor(ctx, r.s.Timeout, func() bool {
		for _, name := range lbs {
			if _, ok := complete[name]; ok {
				continue
			}
			if changed, ok := r.w.tap.HasBackends(name, want); ok {
				complete[name] = changed
			}
		}
		return len(complete) == len(lbs)
	})
	out.Complete = len(complete)
	out.Timeline = timeline(start, slices.Collect(maps.Values(complete)))
	if werr != nil {
		out.TimedOut = true
		out.Seconds = time.Since(start).Seconds()
	} else {
		out.Seconds = last(complete).Sub(start).Seconds()
	}

	// Count what is still issued after the load balancers are complete, until a quiet
	// period passes without any.
	quietDeadline := time.Now().Add(r.s.Timeout / 2)
	for prev := r.w.tap.Issued(); time.Now().Before(quietDeadline); {
		if err := sleep(ctx, r.s.Settle); err != nil {
			return err
		}
		cur := r.w.tap.Issued()
		if cur == prev {
			break
		}
		prev = cur
	}
	afterSnap := r.w.tap.Counts()
	afterCalls, err := r.w.calls(ctx)
	if err != nil {
		return err
	}
	out.Calls = results.Calls(afterCalls.Since(beforeCalls))
	var sumU, sumE int
	for _, name := range lbs {
		u := afterSnap[name].Updates - before[name].Updates
		e := afterSnap[name].Ensures - before[name].Ensures
		sumU, sumE = sumU+u, sumE+e
		out.Unchanged += afterSnap[name].Unchanged - before[name].Unchanged
		out.UpdatesMax, out.EnsuresMax = max(out.UpdatesMax, u), max(out.EnsuresMax, e)
	}
	out.UpdatesMean = float64(sumU) / float64(len(lbs))
	out.EnsuresMean = float64(sumE) / float64(len(lbs))
	r.logf("%s: %d/%d load balancers complete in %.1fs; backend updates per LB mean %.1f max %d (%d changed nothing), ensures mean %.1f",
		what, out.Complete, len(lbs), out.Seconds, out.UpdatesMean, out.UpdatesMax, out.Unchanged, out.EnsuresMean)
	if werr != nil {
		return fmt.Errorf("%d of %d load balancers got every new node: %w", len(complete), len(lbs), werr)
	}
	return nil
}

// holHang is the Service whose load balancer calls hang.
const holHang = "hol-hang"

// scenarioHeadOfLine: the cloud holds every call for one new Service's load balancer
// until the caller gives up; time until K other new Services have theirs.
func (r *rowRun) scenarioHeadOfLine(ctx context.Context) error {
	out := &r.res.HeadOfLine
	out.Others = r.s.HeadOfLine
	hangKey := namespace + "/" + holHang
	r.w.tap.Hang(hangKey)
	defer r.w.tap.Release()
	_, hangLB, err := createServices(ctx, r.w.kube, []string{holHang})
	if err != nil {
		return err
	}
	r.allServices++
	// The others come once the hanging call is in flight, so that it is ahead of them.
	if err := r.waitFor(ctx, time.Minute, func() bool { return r.w.tap.Counts()[hangLB[hangKey]].Held > 0 }); err != nil {
		return fmt.Errorf("the controllers made no call for the hanging load balancer: %w", err)
	}
	names := make([]string, r.s.HeadOfLine)
	for i := range names {
		names[i] = fmt.Sprintf("hol-%05d", i)
	}
	start := time.Now()
	sent, _, err := createServices(ctx, r.w.kube, names)
	if err != nil {
		return err
	}
	r.allServices += len(names)
	keys := slices.Sorted(maps.Keys(sent))
	werr := r.waitFor(ctx, r.s.Timeout, func() bool { return r.trk.allReady(keys) })
	done := r.trk.ready(keys)
	out.Ready = len(done)
	out.Held = r.w.tap.Counts()[hangLB[hangKey]].Held
	out.Timeline = timeline(start, slices.Collect(maps.Values(done)))
	out.P50, _, out.Max = latencies(sent, done)
	if werr != nil {
		out.TimedOut = true
		out.Seconds = time.Since(start).Seconds()
	} else {
		out.Seconds = last(done).Sub(start).Seconds()
	}
	r.logf("head-of-line: %d/%d others ready in %.1fs (hung calls: %d)", out.Ready, len(keys), out.Seconds, out.Held)
	// Let the hanging load balancer through and wait for it, so the steady state
	// starts with every Service served.
	r.w.tap.Release()
	if err := r.waitFor(ctx, r.s.Timeout, func() bool { return r.trk.allReady([]string{hangKey}) }); err != nil {
		r.problem("head-of-line: the hanging Service did not get its load balancer after the hang ended: %v", err)
	}
	if werr != nil {
		return fmt.Errorf("%d of %d other services got a load balancer: %w", len(done), len(keys), werr)
	}
	return nil
}

// scenarioSteady counts cloud calls over the steady window after a quiet period.
func (r *rowRun) scenarioSteady(ctx context.Context) error {
	out := &r.res.Steady
	out.Nodes, out.Services = r.allNodes, r.allServices
	// Routes a controller creates late (a long reconciliation period, throttled
	// creates retried a period later) are the bursts' work, not steady state: give
	// them a while, then count what is still missing.
	cidrs := append(append(append([]string{podCIDR(0)}, r.cidrs...), r.fanCIDRs...), r.nbCIDRs...)
	missing := func() int { return r.routesMissing(cidrs) }
	// So are backend updates still draining: nephele queues them behind new load
	// balancers, and the last burst's can outlast its scenario. The tap keeps only the
	// fan-out's nodes of each load balancer's backends (Watch), so it cannot tell
	// whether every load balancer has every node; a load balancer call issued tells
	// that a controller still has work, whichever controller it is.
	prevCalls, lastCall := r.w.tap.Issued(), time.Now()
	drained := func() bool {
		if n := r.w.tap.Issued(); n != prevCalls {
			prevCalls, lastCall = n, time.Now()
		}
		return time.Since(lastCall) >= r.s.Settle
	}
	waitStart := time.Now()
	if r.s.RouteWait > 0 {
		r.logf("steady state: waiting up to %s for every node's route and for load balancer calls to stop for %s", r.s.RouteWait, r.s.Settle)
		// drained runs at every poll, so that calls that stopped while routes were
		// still missing count as quiet time.
		if err := r.waitFor(ctx, r.s.RouteWait, func() bool { d := drained(); return missing() == 0 && d }); err != nil && ctx.Err() != nil {
			return err
		}
	}
	out.RoutesWaitSeconds = time.Since(waitStart).Seconds()
	settling := r.w.tap.Issued()
	if err := sleep(ctx, r.s.Settle); err != nil {
		return err
	}
	out.RoutesMissing = missing()
	quiet := r.w.tap.Issued() - settling
	if r.s.RouteWait > 0 {
		out.LBCallsBeforeWindow = &quiet
	}
	before, err := r.w.calls(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	r.logf("steady state: counting cloud calls for %s", r.s.SteadyWindow)
	if err := sleep(ctx, r.s.SteadyWindow); err != nil {
		return err
	}
	after, err := r.w.calls(ctx)
	if err != nil {
		return err
	}
	out.Seconds = time.Since(start).Seconds()
	out.Calls = results.Calls(after.Since(before))
	r.logf("steady state: %d calls in %.0fs over %d nodes: %.3f recurring calls per node per hour (%d routes missing and %d load balancer calls in the quiet period before)",
		out.Calls.Total(), out.Seconds, out.Nodes, out.PerNodeHour(""), out.RoutesMissing, quiet)
	return nil
}

// readMemory fills in the memory results from /proc and the process's own statistics.
func (r *rowRun) readMemory(ctx context.Context) {
	out := &r.res.Memory
	if ps, err := r.ctrl.readProc(); err != nil {
		r.problem("memory: %v", err)
	} else {
		out.PeakRSSBytes, out.CPUSeconds = ps.PeakRSS, ps.CPUSeconds
	}
	if st, err := r.ctrl.stats(ctx); err != nil {
		r.problem("memory: %v", err)
	} else {
		out.PeakHeapLiveBytes, out.PeakHeapObjectsBytes = st.PeakHeapLiveBytes, st.PeakHeapObjectsBytes
		out.PeakGoTotalBytes, out.PeakGoroutines = st.PeakTotalBytes, st.PeakGoroutines
	}
	for _, p := range r.mem.stop() {
		out.RSSTimeline = append(out.RSSTimeline, results.Point{T: p.t.Seconds(), V: float64(p.rss) / (1 << 20)})
	}
}

// routeTimes fills in when each burst's nodes got their routes, from what the tap saw
// over the whole run.
func (r *rowRun) routeTimes() {
	if r.w == nil || r.w.tap == nil {
		return
	}
	routes := r.w.tap.Routes()
	fill := func(out *results.Routes, start time.Time, cidrs []string) {
		if start.IsZero() {
			return
		}
		var latest time.Time
		for _, c := range cidrs {
			if at, ok := routes[c]; ok {
				out.Complete++
				if at.After(latest) {
					latest = at
				}
			}
		}
		if out.Complete == len(cidrs) && len(cidrs) > 0 {
			out.Seconds = max(0, latest.Sub(start).Seconds())
		}
	}
	fill(&r.res.Init.Routes, r.initStart, r.cidrs)
	fill(&r.res.FanOut.Routes, r.fanStart, r.fanCIDRs)
	if r.res.FanOutCalm != nil {
		fill(&r.res.FanOutCalm.Routes, r.calmStart, r.calmCIDRs)
	}
}

// timeline is the cumulative count of events over time since start.
func timeline(start time.Time, at []time.Time) []results.Point {
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	pts := []results.Point{{T: 0, V: 0}}
	for i, t := range at {
		pts = append(pts, results.Point{T: max(0, t.Sub(start).Seconds()), V: float64(i + 1)})
	}
	return pts
}

// latencies returns the median, the 99th percentile and the maximum of done[k]-sent[k]
// in seconds.
func latencies(sent, done map[string]time.Time) (p50, p99, highest float64) {
	var ds []float64
	for k, d := range done {
		if s, ok := sent[k]; ok {
			ds = append(ds, max(0, d.Sub(s).Seconds()))
		}
	}
	if len(ds) == 0 {
		return 0, 0, 0
	}
	sort.Float64s(ds)
	q := func(f float64) float64 { return ds[min(len(ds)-1, int(f*float64(len(ds))))] }
	return q(0.5), q(0.99), ds[len(ds)-1]
}

// last returns the latest time in m.
func last(m map[string]time.Time) time.Time {
	var t time.Time
	for _, v := range m {
		if v.After(t) {
			t = v
		}
	}
	return t
}

// converged fills in the run's Converged line from the scenarios' results: the latest of
// what each scenario waited for, on the init burst's clock.
func (r *rowRun) converged() {
	out := &r.res.Converged
	var missing []string
	end := 0.0
	at := func(what string, start time.Time, seconds float64, ok bool) {
		if !ok || start.IsZero() || r.initStart.IsZero() {
			missing = append(missing, what)
			return
		}
		end = max(end, start.Sub(r.initStart).Seconds()+seconds)
	}
	in, sv, fo := &r.res.Init, &r.res.Services, &r.res.FanOut
	at("node initialization", r.initStart, in.Seconds, !in.TimedOut && in.Nodes > 0 && in.Initialized == in.Nodes)
	at("the init burst's routes", r.initStart, in.Routes.Seconds, in.Nodes > 0 && in.Routes.Complete == in.Nodes)
	at("load balancers", r.servicesStart, sv.Seconds, !sv.TimedOut && sv.Services > 0 && sv.Ready == sv.Services)
	var fanInit map[string]time.Time
	if r.trk != nil {
		fanInit = r.trk.initialized(r.fanNodes)
	}
	at("the fan-out's initialization", r.fanStart, last(fanInit).Sub(r.fanStart).Seconds(), len(r.fanNodes) > 0 && len(fanInit) == len(r.fanNodes))
	at("the fan-out's backends", r.fanStart, fo.Seconds, !fo.TimedOut && fo.LoadBalancers > 0 && fo.Complete == fo.LoadBalancers)
	at("the fan-out's routes", r.fanStart, fo.Routes.Seconds, fo.Nodes > 0 && fo.Routes.Complete == fo.Nodes)
	out.Seconds, out.Done = end, len(missing) == 0
	out.Missing = strings.Join(missing, ", ")
	if out.Done {
		r.logf("converged: everything after %.1fs", out.Seconds)
	} else {
		r.logf("converged: not by the end of the run (missing %s)", out.Missing)
	}
}

// routesMissing counts the pod CIDRs the cloud has confirmed no route for.
func (r *rowRun) routesMissing(cidrs []string) int {
	routes := r.w.tap.Routes()
	n := 0
	for _, c := range cidrs {
		if _, ok := routes[c]; !ok {
			n++
		}
	}
	return n
}
