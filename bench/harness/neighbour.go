package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nephele-dev/nephele/bench/results"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
)

// neighbourProbe is the load balancer the neighbour asks for: it never exists, so each
// call is a cheap read the cloud answers 404, or 429 when the account's quota is spent.
const neighbourProbe = "neighbour-probe"

// neighbour is another client of the cloud account: it sends qps calls a second,
// each in a goroutine of its own so that a slow answer does not slow the rate, straight
// to the cloud (not through the tap), and counts the answers by HTTP status.
type neighbour struct {
	mu    sync.Mutex
	codes map[int]uint64
	wg    sync.WaitGroup
}

// startNeighbour starts sending until ctx ends; stop waits for the calls under way.
func startNeighbour(ctx context.Context, c *client.Client, qps float64) *neighbour {
	n := &neighbour{codes: map[int]uint64{}}
	interval := time.Duration(float64(time.Second) / qps)
	n.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			// A call under way when the neighbour stops finishes, so that every call
			// the cloud counts is one the neighbour counts too.
			n.wg.Go(func() {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				n.call(cctx, c)
			})
		}
	})
	return n
}

func (n *neighbour) call(ctx context.Context, c *client.Client) {
	code := 200
	_, err := c.GetLoadBalancer(ctx, neighbourProbe)
	var ce *client.Error
	switch {
	case errors.As(err, &ce):
		code = ce.StatusCode
	case err != nil:
		code = 0 // no answer
	}
	n.mu.Lock()
	n.codes[code]++
	n.mu.Unlock()
}

// stop waits for the calls under way and returns the answers by status; call it after
// the context given to startNeighbour has ended.
func (n *neighbour) stop() map[int]uint64 {
	n.wg.Wait()
	n.mu.Lock()
	defer n.mu.Unlock()
	return maps.Clone(n.codes)
}

// scenarioNeighbour: while another client of the account sends NeighbourQPS calls a
// second, NeighbourNodes join and NeighbourServices are created at once; time until
// every node is initialized and has its route and every Service its load balancer,
// and how many of each client's calls the cloud throttled.
func (r *rowRun) scenarioNeighbour(ctx context.Context) error {
	out := &r.res.Neighbour
	if len(r.nbNodes) == 0 && r.s.NeighbourServices == 0 {
		return nil
	}
	out.Nodes, out.Services = len(r.nbNodes), r.s.NeighbourServices
	if err := r.addInstances(ctx, r.nbNodes); err != nil {
		return err
	}
	nc, err := client.New(r.w.cloud.URL(), r.w.token, client.WithUserAgent("bench-neighbour"))
	if err != nil {
		return fmt.Errorf("neighbour's cloud client: %w", err)
	}
	before, err := r.w.calls(ctx)
	if err != nil {
		return err
	}
	nctx, stopNeighbour := context.WithCancel(ctx)
	nb := startNeighbour(nctx, nc, r.s.NeighbourQPS)
	// Let the neighbour settle into its rate before the burst.
	if err := sleep(ctx, 2*time.Second); err != nil {
		stopNeighbour()
		nb.stop()
		return err
	}
	start := time.Now()
	if _, err := createNodes(ctx, r.w.kube, r.nbNodes, r.nbCIDRs, r.addrs); err != nil {
		stopNeighbour()
		nb.stop()
		return err
	}
	r.allNodes += len(r.nbNodes)
	names := make([]string, r.s.NeighbourServices)
	for i := range names {
		names[i] = fmt.Sprintf("nb-svc-%05d", i)
	}
	_, lbNames, err := createServices(ctx, r.w.kube, names)
	if err != nil {
		stopNeighbour()
		nb.stop()
		return err
	}
	r.allServices += len(names)
	maps.Copy(r.lbNames, lbNames)
	keys := slices.Sorted(maps.Keys(lbNames))
	routed := func() map[string]time.Time {
		routes := r.w.tap.Routes()
		got := map[string]time.Time{}
		for _, c := range r.nbCIDRs {
			if at, ok := routes[c]; ok {
				got[c] = at
			}
		}
		return got
	}
	werr := r.waitFor(ctx, r.s.Timeout, func() bool {
		return r.trk.allInitialized(r.nbNodes) && r.trk.allReady(keys)
	})
	if werr == nil {
		// Routes are waited for apart, and for less long: a controller that creates
		// routes only on its reconciliation period (upstream tuned: 5 minutes) would
		// hold the scenario for the whole timeout, and its missing routes are counted.
		routeWait := min(r.s.Timeout, max(r.s.RouteWait, 10*time.Second))
		if err := r.waitFor(ctx, routeWait, func() bool { return len(routed()) == len(r.nbCIDRs) }); err != nil && ctx.Err() != nil {
			werr = err
		}
	}
	stopNeighbour()
	codes := nb.stop()
	after, err := r.w.calls(ctx)
	if err != nil {
		return err
	}
	calls := results.Calls(after.Since(before))
	for code, n := range codes {
		if c := calls[api.OpLBGet]; c != nil {
			c[code] -= min(c[code], n)
		}
		out.NeighbourCalls += int(n)
	}
	out.NeighbourThrottled = int(codes[429])
	out.Calls = calls

	inited, ready, routes := r.trk.initialized(r.nbNodes), r.trk.ready(keys), routed()
	out.Initialized, out.Ready, out.Routed = len(inited), len(ready), len(routes)
	since := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return max(0, t.Sub(start).Seconds())
	}
	out.InitSeconds, out.ServicesSeconds, out.RoutesSeconds = since(last(inited)), since(last(ready)), since(last(routes))
	out.Seconds = max(out.InitSeconds, out.ServicesSeconds, out.RoutesSeconds)
	out.Complete = werr == nil && out.Routed == out.Nodes
	if !out.Complete {
		out.Seconds = time.Since(start).Seconds()
	}
	if out.Routed < out.Nodes {
		out.RoutesSeconds = out.Seconds
	}
	out.TimedOut = werr != nil
	r.logf("noisy neighbour: %d/%d nodes, %d/%d routes, %d/%d LBs in %.1fs; neighbour %d of %d calls throttled, controllers %d of %d",
		out.Initialized, out.Nodes, out.Routed, out.Nodes, out.Ready, out.Services, out.Seconds,
		out.NeighbourThrottled, out.NeighbourCalls, out.Calls.Throttled(), out.Calls.Total())
	if werr != nil {
		return fmt.Errorf("not every node and load balancer done: %w", werr)
	}
	return nil
}
