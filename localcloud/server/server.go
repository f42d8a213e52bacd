package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/dataplane"
	"github.com/nephele-dev/nephele/localcloud/faults"
	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/localcloud/keylock"
	"github.com/nephele-dev/nephele/localcloud/store"
)

// Defaults of Config's optional fields.
const (
	DefaultListen       = "127.0.0.1:0"
	DefaultRegion       = "local"
	DefaultInstanceType = "local.small"
)

// Default address ranges, inside 127.0.0.0/8: Linux routes all of it to the loopback
// interface, so VIPs and instance addresses work without root.
var (
	DefaultZones        = []string{"local-a", "local-b", "local-c"}
	DefaultVIPPool      = netip.MustParsePrefix("127.100.0.0/16")
	DefaultInstanceCIDR = netip.MustParsePrefix("127.200.0.0/16")
)

// loopback is where the proxy's VIPs are.
var loopback = netip.MustParsePrefix("127.0.0.0/8")

// Config configures a Server. Zero values take the defaults above.
type Config struct {
	// StatePath is the bbolt state file; it is created if missing. Required.
	StatePath string
	// Listen is the API's host:port; port 0 picks a free one (see Server.Addr).
	Listen string
	// Token is the administrator's bearer token: every request but /healthz may carry
	// it. Required.
	Token string
	// CCMToken, when set, is a second bearer token with a cloud-controller-manager's
	// role (IsCCMOperation): reading instances, load balancers and routes. Everything
	// else, making or stopping instances (whose boot command runs as root on the
	// machine), consoles, faults and metrics, answers it 403. It must differ from Token.
	CCMToken string
	// CSIToken, when set, is a bearer token with a CSI driver's role (IsCSIOperation):
	// every volume operation, and reading instances to find a node's. Everything else
	// answers it 403. It must differ from Token and CCMToken.
	CSIToken string
	// Region, Zones and InstanceType are given to instances created without them;
	// zones go round-robin in creation order.
	Region       string
	Zones        []string
	InstanceType string
	// InstanceCIDR is where instances created without an InternalIP get one from.
	InstanceCIDR netip.Prefix
	// VIPPool is where load balancer VIPs come from. It decides the data plane: inside
	// 127.0.0.0/8 the user-space proxy (dataplane.Proxy, ipMode Proxy), which needs no
	// root; outside it the kernel's route to the hosts (dataplane.Kernel, ipMode VIP),
	// which needs Hosts. Default DefaultVIPPool, or hosts.DefaultVIPPool with Hosts.
	VIPPool netip.Prefix
	// ServingCAFile, when set, makes the API HTTPS: at start the server makes a
	// certificate authority of its own and a serving certificate for its address
	// (127.0.0.1 and localhost too), keeps their keys in memory only, and writes the
	// authority's certificate to ServingCAFile, the one clients trust (client.WithCA, the
	// local provider's caFile or caData). Empty serves plain HTTP, for tests and tools on
	// loopback.
	ServingCAFile string
	// Faults are the fault rules at start; /admin/faults changes them later.
	Faults []api.Fault
	// FaultSeed seeds the random draws of latency distributions and error rates.
	FaultSeed uint64
	// DataPlane configures the load balancer data plane. Its Logger and Metrics are set
	// by the server.
	DataPlane dataplane.Config
	// VolumeDir holds the volumes' files ("<volume ID>.img", sparse); created if
	// missing. Empty is DefaultVolumeDir(StatePath).
	VolumeDir string
	// MaxVolumeSize bounds a volume's size, a multiple of api.VolumeSizeUnit; 0 is
	// api.DefaultMaxVolumeSize.
	MaxVolumeSize int64
	// VolumeAttachLimit is how many volumes one instance takes; 0 is
	// api.DefaultVolumeAttachLimit.
	VolumeAttachLimit int
	// Hosts, when set, enables host instances (localcloud/hosts): real hosts on this
	// machine, which needs root. Its Range is InstanceCIDR (hosts.DefaultRange when that
	// is unset) and its Logger the server's; an empty Dir is DefaultHostDir(StatePath).
	Hosts *hosts.Config
	// Logger receives the server's logs.
	Logger logr.Logger
}

func (c *Config) defaults() error {
	if c.StatePath == "" {
		return errors.New("the state file path is required")
	}
	if c.Token == "" {
		return errors.New("an API token is required")
	}
	if c.CSIToken != "" {
		if err := checkRoleToken("CSI driver", c.CSIToken, c.Token, c.CCMToken); err != nil {
			return err
		}
	}
	if c.CCMToken != "" {
		if err := checkRoleToken("CCM", c.CCMToken, c.Token, c.CSIToken); err != nil {
			return err
		}
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Region == "" {
		c.Region = DefaultRegion
	}
	if len(c.Zones) == 0 {
		c.Zones = DefaultZones
	}
	if c.InstanceType == "" {
		c.InstanceType = DefaultInstanceType
	}
	if err := c.hostsDefaults(); err != nil {
		return err
	}
	if err := c.volumeDefaults(); err != nil {
		return err
	}
	if !c.InstanceCIDR.IsValid() {
		c.InstanceCIDR = DefaultInstanceCIDR
	}
	if !c.VIPPool.IsValid() {
		c.VIPPool = DefaultVIPPool
	}
	c.InstanceCIDR, c.VIPPool = c.InstanceCIDR.Masked(), c.VIPPool.Masked()
	if !loopback.Contains(c.VIPPool.Addr()) || c.VIPPool.Bits() < loopback.Bits() {
		if c.Hosts == nil {
			return fmt.Errorf("VIP pool %s: a pool outside %s is routed to host instances by the kernel and needs them (--hosts); without hosts, VIPs are on the loopback range", c.VIPPool, loopback)
		}
		c.Hosts.VIPPool = c.VIPPool
	}
	spec := api.InstanceSpec{Name: "x", Region: c.Region, InstanceType: c.InstanceType}
	for _, z := range c.Zones {
		spec.Zone = z
		if err := spec.Validate(); err != nil {
			return fmt.Errorf("default zone, region or instance type: %w", err)
		}
	}
	return api.ValidateFaults(c.Faults)
}

// Server is a running local cloud.
type Server struct {
	cfg   Config
	log   logr.Logger
	store *store.Store
	plane dataplane.Plane
	// ipMode is what the data plane is: VIP for the kernel's, Proxy for the proxy.
	ipMode  api.IPMode
	faults  *faults.Injector
	metrics *metrics
	ln      net.Listener
	http    *http.Server
	// stopping is closed when Shutdown starts: injected latency stops waiting.
	stopping chan struct{}
	done     chan struct{}
	serrMu   sync.Mutex
	serr     error

	// lbs serializes the changes to one load balancer, so that its listeners and its
	// record change together; changes to different load balancers run in parallel, as
	// a cloud serves them.
	lbs keylock.Locks
	// vipMu guards claimed: the VIPs that changes in flight are about to store, so
	// that two creations never pick, or two requests never take, the same address.
	vipMu   sync.Mutex
	claimed map[netip.Addr]string

	// ccmTokens are the tokens with the CCM's role: Config.CCMToken until
	// SetCCMTokens rotates them.
	ccmTokens atomic.Pointer[[]string]

	// machine makes host instances; nil when they are disabled.
	machine *hosts.Machine
	// instances serializes the changes to one instance, so that its record and its
	// host on the machine change together.
	instances keylock.Locks
	// volumes serializes the changes to one volume, so that its record, its file and
	// its device change together; volumeNames serializes creates by name. An attach or
	// detach locks the instance first, then the volume.
	volumes     keylock.Locks
	volumeNames keylock.Locks
	// routeMu serializes reading the routes and programming them into the machine, so
	// an older reading never overwrites a newer one.
	routeMu sync.Mutex

	// dpErrMu guards dpErrors: data plane failures per load balancer, shown in
	// its status until an ensure or update succeeds.
	dpErrMu  sync.Mutex
	dpErrors map[string]string

	shutdownOnce sync.Once
	shutdownErr  error
}

// Start opens the state file, re-opens the listeners of every stored load balancer,
// and serves the API until Shutdown. A load balancer whose listeners cannot be opened
// (a port taken while the cloud was down) does not stop the start: its status reports
// the error and the next ensure retries.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.defaults(); err != nil {
		return nil, fmt.Errorf("local cloud configuration: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, done: make(chan struct{}), dpErrors: map[string]string{}, claimed: map[netip.Addr]string{}}
	var ccm []string
	if cfg.CCMToken != "" {
		ccm = []string{cfg.CCMToken}
	}
	s.ccmTokens.Store(&ccm)
	reg := prometheus.NewRegistry()
	var err error
	if s.metrics, err = newMetrics(reg); err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	inj, err := faults.New(faults.Options{Seed: cfg.FaultSeed}, cfg.Faults)
	if err != nil {
		return nil, fmt.Errorf("fault rules: %w", err)
	}
	s.faults = inj

	if err := checkLostState(cfg); err != nil {
		return nil, err
	}
	s.store, err = store.Open(cfg.StatePath)
	if err != nil {
		return nil, err
	}
	if err := s.openHosts(ctx); err != nil {
		_ = s.store.Close()
		return nil, err
	}
	// fail undoes what Start did so far, but for the hosts: a busy port must not stop
	// a running cluster's hosts, which stay recorded for the next start to adopt.
	fail := func(err error) (*Server, error) {
		if s.machine != nil {
			err = s.releaseHosts(context.WithoutCancel(ctx), err)
		}
		_ = s.store.Close()
		return nil, err
	}
	if err := s.openVolumes(ctx); err != nil {
		return fail(fmt.Errorf("volumes: %w", err))
	}
	if err := s.startPlane(reg); err != nil {
		return fail(fmt.Errorf("starting the data plane: %w", err))
	}
	if err := s.restore(ctx); err != nil {
		s.plane.Close()
		return fail(err)
	}

	var lc net.ListenConfig
	s.ln, err = lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		s.plane.Close()
		return fail(fmt.Errorf("listening on %s: %w", cfg.Listen, err))
	}
	if cfg.ServingCAFile != "" {
		tlsCfg, err := servingTLS(s.ln.Addr(), cfg.ServingCAFile)
		if err != nil {
			_ = s.ln.Close()
			s.plane.Close()
			return fail(err)
		}
		s.ln = tls.NewListener(s.ln, tlsCfg)
	}
	s.stopping = make(chan struct{})
	s.http = &http.Server{
		Handler:           s.handler(reg),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.serrMu.Lock()
			s.serr = err
			s.serrMu.Unlock()
			s.log.Error(err, "serving the API")
		}
	}()
	s.log.Info("local cloud serving", "addr", s.Addr(), "state", cfg.StatePath, "vipPool", cfg.VIPPool, "hosts", s.machine != nil)
	return s, nil
}

// releaseHosts lets go of the machine without stopping its hosts, after a failure to
// start or serve, and says so in the error.
func (s *Server) releaseHosts(ctx context.Context, err error) error {
	rerr := s.machine.Release(ctx)
	return errors.Join(fmt.Errorf("%w; the host instances on this machine keep running, recorded in %s for the next start to adopt (localcloud --cleanup removes them)", err, s.machine.Dir()), rerr)
}

// startPlane starts the data plane the VIP pool asks for: the kernel's when the
// machine has the pool (it is outside the loopback range), the proxy otherwise.
func (s *Server) startPlane(reg *prometheus.Registry) error {
	cfg := s.cfg.DataPlane
	cfg.Logger = s.cfg.Logger.WithName("dataplane")
	cfg.Metrics = reg
	if s.machine != nil && s.machine.VIPPool().IsValid() {
		k, err := dataplane.NewKernel(cfg, s.machine)
		if err != nil {
			return err
		}
		s.plane, s.ipMode = k, api.IPModeVIP
		return nil
	}
	p, err := dataplane.NewProxy(cfg)
	if err != nil {
		return err
	}
	s.plane, s.ipMode = p, api.IPModeProxy
	return nil
}

// restore re-opens the listeners of every stored load balancer, or programs them into
// the machine.
func (s *Server) restore(ctx context.Context) error {
	lbs, err := s.store.ListLoadBalancers(ctx)
	if err != nil {
		return fmt.Errorf("reading load balancers: %w", err)
	}
	for _, lb := range lbs {
		dp, err := toDataPlane(&lb)
		if err == nil {
			err = s.plane.Apply(ctx, dp, nil)
		}
		if err != nil {
			s.setDPError(lb.Name, err)
			s.log.Error(err, "re-opening a load balancer's listeners", "loadbalancer", lb.Name)
		}
	}
	if k, ok := s.plane.(*dataplane.Kernel); ok {
		// Removes what the last run left of load balancers the state no longer has.
		if err := k.Sync(ctx); err != nil {
			s.log.Error(err, "programming the load balancers")
		}
	}
	s.log.V(1).Info("load balancers restored", "count", len(lbs), "ipMode", s.ipMode)
	return nil
}

// Addr returns the API's bound host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL returns the API's base URL: "https://host:port" with ServingCAFile, else
// "http://host:port".
func (s *Server) URL() string {
	if s.cfg.ServingCAFile != "" {
		return "https://" + s.Addr()
	}
	return "http://" + s.Addr()
}

// Faults returns the fault injector, for in-process control; /admin/faults does the
// same over HTTP.
func (s *Server) Faults() *faults.Injector { return s.faults }

// Done is closed when the server stops serving, after Shutdown or a serving error.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err returns the error that stopped serving, nil after a clean Shutdown.
func (s *Server) Err() error {
	s.serrMu.Lock()
	defer s.serrMu.Unlock()
	return s.serr
}

// Shutdown stops the API, letting requests in flight finish (injected latency is cut
// short and answered 503), closes every load balancer listener, stops every host and
// removes what hosts need from the machine (their directories stay, and the next Start
// boots the hosts recorded running), and closes the state file. When ctx ends first,
// remaining connections are closed and hosts still stopping are killed. It is safe to
// call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		close(s.stopping)
		var errs []error
		if err := s.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping the API: %w", err))
			_ = s.http.Close()
		}
		<-s.done
		s.plane.Close()
		if s.machine != nil {
			if err := s.machine.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("stopping hosts: %w", err))
			}
		}
		// Handlers have returned, so nothing writes to the store any more.
		if err := s.store.Close(); err != nil {
			errs = append(errs, err)
		}
		s.shutdownErr = errors.Join(errs...)
		s.log.Info("local cloud stopped")
	})
	return s.shutdownErr
}

// Release stops the API and the load balancers like Shutdown, but leaves the host
// instances running and recorded for the next Start to adopt, as a cloud killed with
// SIGKILL would: for a caller whose start failed after Start returned. err is why; the
// answer says, as Start's own failures do, that the hosts keep running.
func (s *Server) Release(ctx context.Context, err error) error {
	s.shutdownOnce.Do(func() {
		close(s.stopping)
		if serr := s.http.Shutdown(ctx); serr != nil {
			_ = s.http.Close()
		}
		<-s.done
		s.plane.Close()
		if s.machine != nil {
			err = s.releaseHosts(ctx, err)
		}
		s.shutdownErr = errors.Join(err, s.store.Close())
	})
	return s.shutdownErr
}

func (s *Server) setDPError(name string, err error) {
	s.dpErrMu.Lock()
	defer s.dpErrMu.Unlock()
	if err == nil {
		delete(s.dpErrors, name)
	} else {
		s.dpErrors[name] = err.Error()
	}
}

func (s *Server) dpError(name string) string {
	s.dpErrMu.Lock()
	defer s.dpErrMu.Unlock()
	return s.dpErrors[name]
}

// SetCCMTokens replaces the tokens with a cloud-controller-manager's role. Several at
// once are how a credential is rotated without a failed call: add the new token, give it
// to the CCM, and remove the old one once the CCM uses the new. None may be empty or the
// administrator's; on error nothing changes.
func (s *Server) SetCCMTokens(tokens ...string) error {
	for i, t := range tokens {
		if err := checkRoleToken("CCM", t, s.cfg.Token, s.cfg.CSIToken); err != nil {
			return fmt.Errorf("CCM token %d: %w", i, err)
		}
	}
	list := slices.Clone(tokens)
	s.ccmTokens.Store(&list)
	return nil
}

// checkRoleToken refuses a token of a role (the CCM's, the CSI driver's) that is empty,
// the administrator's, or the other role's: each role must stay its own, smaller than the
// administrator's (a token shared by two roles would get only one of them).
func checkRoleToken(role, token, admin, other string) error {
	switch {
	case strings.TrimSpace(token) == "":
		return fmt.Errorf("the %s's token is empty", role)
	case token == admin:
		return fmt.Errorf("the %s's token is the administrator's: give the %s a token of its own", role, role)
	case other != "" && token == other:
		return fmt.Errorf("the %s's token is another role's: give the %s a token of its own", role, role)
	}
	return nil
}
