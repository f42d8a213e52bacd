package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nephele-dev/nephele/bench/cloudtap"
	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/client"
	"github.com/nephele-dev/nephele/localcloud/dataplane"
	"github.com/nephele-dev/nephele/localcloud/server"
	"github.com/nephele-dev/nephele/providers/local"
)

// Cluster-wide settings every row gets.
const (
	clusterName = "bench"
	// clusterCIDR has room for 16384 node /24s, more than the large scale needs.
	clusterCIDR = "100.64.0.0/10"
	namespace   = "bench"
	// servicePort is above 1024 so the cloud's data plane needs no privilege.
	servicePort = 8080
)

// vipPool is where the load balancer VIPs of the i-th world come from: a /16 of its own
// (127.150.0.0/16 for the first), so that worlds running side by side, and local clouds
// that tests run beside the benchmark, never want the same VIP:port.
func vipPool(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, byte(150 + i%100), 0, 0}), 16)
}

// world is one row's control plane, cloud and tap.
type world struct {
	cp     *controlplane.Env
	kube   kubernetes.Interface
	cloud  *server.Server
	direct *client.Client // straight to the cloud: instances, faults, call counts
	tap    *cloudtap.Tap
	token  string
}

// startWorld starts a control plane with kwok, the local cloud and the tap.
func startWorld(ctx context.Context, binDir string, vips netip.Prefix) (w *world, err error) {
	w = &world{}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.stop(context.Background()))
		}
	}()
	w.cp, err = controlplane.Start(ctx, controlplane.Options{Kwok: true, BinDir: binDir})
	if err != nil {
		return w, fmt.Errorf("starting the control plane: %w", err)
	}
	cfg := rest.CopyConfig(w.cp.Config)
	// The harness creates whole scenarios' objects at once; its own client limit
	// would only blur the start of a burst.
	cfg.QPS, cfg.Burst = 1000, 2000
	if w.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return w, fmt.Errorf("building the harness client: %w", err)
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return w, fmt.Errorf("generating the cloud token: %w", err)
	}
	w.token = hex.EncodeToString(tok)
	w.cloud, err = server.Start(ctx, server.Config{
		StatePath: filepath.Join(w.cp.Dir, "localcloud.db"),
		Token:     w.token,
		// A pool of its own, so that the load balancers' listeners cannot collide
		// with those of a local cloud that tests run beside the benchmark.
		VIPPool: vips,
		// kwok nodes have addresses that lead nowhere: health checks would only
		// burn CPU the controllers under test need.
		DataPlane: dataplane.Config{DisableHealthChecks: true},
	})
	if err != nil {
		return w, fmt.Errorf("starting the local cloud: %w", err)
	}
	if w.direct, err = client.New(w.cloud.URL(), w.token, client.WithUserAgent("bench-harness")); err != nil {
		return w, fmt.Errorf("local cloud client: %w", err)
	}
	if w.tap, err = cloudtap.Start(w.cloud.URL()); err != nil {
		return w, err
	}
	return w, nil
}

// stop stops everything the world started, the control plane last.
func (w *world) stop(ctx context.Context) error {
	var errs []error
	if w.tap != nil {
		errs = append(errs, w.tap.Close())
	}
	if w.cloud != nil {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		errs = append(errs, w.cloud.Shutdown(sctx))
		cancel()
	}
	if w.cp != nil {
		errs = append(errs, w.cp.Stop())
	}
	return errors.Join(errs...)
}

// writeCloudConfig writes the providers/local cloud config pointing at the tap.
func (w *world) writeCloudConfig(requestTimeout time.Duration) (string, error) {
	path := filepath.Join(w.cp.Dir, "cloud-config.yaml")
	body, err := local.File{Endpoint: w.tap.URL(), Token: w.token, RequestTimeout: requestTimeout.String()}.Marshal("the benchmark harness")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, body, 0o600); err != nil {
		return "", fmt.Errorf("writing the cloud config: %w", err)
	}
	return path, nil
}

// setFaults switches on the scale's latency and rate limit for every operation, and
// the cost of a batch of route changes.
func (w *world) setFaults(ctx context.Context, s Scale) error {
	err := w.direct.SetFaults(ctx, []api.Fault{{
		Operation: "*",
		Latency:   &api.Latency{Fixed: api.Duration{Duration: s.CloudLatency}},
		RateLimit: &api.RateLimit{QPS: s.CloudQPS, Burst: s.CloudBurst},
	}, {
		Operation: api.OpRoutesApply,
		Cost:      max(1, s.RouteApplyCost),
	}})
	if err != nil {
		return fmt.Errorf("setting the cloud's fault knobs: %w", err)
	}
	return nil
}

// createInstances creates an instance per name, concurrently, and returns each one's
// InternalIP.
func (w *world) createInstances(ctx context.Context, names []string) (map[string]string, error) {
	out := make(map[string]string, len(names))
	var mu sync.Mutex
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, name := range names {
		g.Go(func() error {
			inst, err := w.direct.CreateInstance(ctx, api.InstanceSpec{Name: name})
			if err != nil {
				return fmt.Errorf("creating instance %s: %w", name, err)
			}
			for _, a := range inst.Addresses {
				if a.Type == api.AddressInternalIP {
					mu.Lock()
					out[name] = a.Address
					mu.Unlock()
					return nil
				}
			}
			return fmt.Errorf("instance %s has no InternalIP", name)
		})
	}
	return out, g.Wait()
}

// calls reads the cloud's call counters.
func (w *world) calls(ctx context.Context) (client.CallCounts, error) {
	cc, err := w.direct.CallCounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the cloud's call counts: %w", err)
	}
	return cc, nil
}

// podCIDR returns the i-th /24 of the cluster CIDR.
func podCIDR(i int) string {
	base := netip.MustParsePrefix(clusterCIDR).Addr().As4()
	n := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	n += uint32(i) << 8
	a := netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	return netip.PrefixFrom(a, 24).String()
}
