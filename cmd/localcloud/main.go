// Command localcloud runs nephele's local cloud: a real cloud API on one machine, with
// instances, load balancers whose VIPs forward TCP and UDP to node addresses, routes,
// fault knobs and call accounting, its state in one bbolt file.
//
//	localcloud --state /tmp/cloud.db --token-file /tmp/token --listen 127.0.0.1:0 --address-file /tmp/cloud.addr
//
// With --hosts (as root) instances can also be real hosts on this machine; --cleanup
// removes what a killed cloud's hosts left:
//
//	localcloud --state /tmp/cloud.db --token-file /tmp/token --hosts --guard-cidr 10.244.0.0/16 --guard-cidr 10.96.0.0/12
//	localcloud --state /tmp/cloud.db --cleanup
//
// It stops cleanly on SIGTERM or SIGINT. See docs/localcloud.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nephele-dev/nephele/internal/atomicfile"
	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/faults"
	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/localcloud/server"
)

// shutdownTimeout bounds a graceful stop.
const shutdownTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, pflag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "localcloud:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	listen, addressFile, state    string
	token, tokenFile              string
	ccmTokenFile                  string
	csiTokenFile                  string
	region, instanceType          string
	zones                         []string
	instanceCIDR, vipPool         string
	faults                        []string
	faultSeed                     uint64
	healthInterval, healthTimeout time.Duration
	dialTimeout, udpIdleTimeout   time.Duration
	disableHealthChecks           bool
	verbosity                     int
	loggingFormat                 string

	servingCAFile string

	hosts, cleanup  bool
	bridge, hostDir string
	guards          []string
	peers           []string
	guardMetric     int
	hostStopTimeout time.Duration

	volumeDir         string
	maxVolumeSize     string
	volumeAttachLimit int
}

func (o *options) flags(fs *pflag.FlagSet) {
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8990", "host:port the API listens on; port 0 picks a free port (see --address-file)")
	fs.StringVar(&o.addressFile, "address-file", "", "write the bound host:port to this file once serving (removed on exit)")
	fs.StringVar(&o.servingCAFile, "serving-ca-file", "", "serve HTTPS: the cloud makes a certificate authority and a certificate for its address at start (keys in memory only) and writes the authority's certificate to this file, for clients to verify with (the local provider's caFile). Without it the API is plain HTTP")
	fs.StringVar(&o.state, "state", "", "the bbolt state file, created if missing (required)")
	fs.StringVar(&o.token, "token", "", "refused: a secret on the command line shows in /proc/*/cmdline; use --token-file")
	_ = fs.MarkHidden("token")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding the administrator's API bearer token: every operation (required)")
	fs.StringVar(&o.ccmTokenFile, "ccm-token-file", "", "file holding a second bearer token with a cloud-controller-manager's role: read instances, manage load balancers and routes; anything else answers it 403")
	fs.StringVar(&o.csiTokenFile, "csi-token-file", "", "file holding a bearer token with a CSI driver's role: manage volumes, read instances; anything else answers it 403")
	fs.StringVar(&o.region, "region", server.DefaultRegion, "region of instances created without one")
	fs.StringSliceVar(&o.zones, "zones", server.DefaultZones, "zones given round-robin to instances created without one")
	fs.StringVar(&o.instanceType, "instance-type", server.DefaultInstanceType, "instance type of instances created without one")
	fs.StringVar(&o.instanceCIDR, "instance-cidr", "", fmt.Sprintf("range InternalIP addresses are assigned from (default %s, or %s with --hosts: its first address goes to the bridge)", server.DefaultInstanceCIDR, hosts.DefaultRange))
	fs.StringVar(&o.vipPool, "vip-pool", "", fmt.Sprintf("range load balancer VIPs are allocated from (default %s; with --hosts %s). Inside 127.0.0.0/8 the load balancers are user-space proxies to node ports (ipMode Proxy, no root needed); outside it, which needs --hosts, the kernel routes each connection to a host unchanged (ipMode VIP)", server.DefaultVIPPool, hosts.DefaultVIPPool))
	fs.StringArrayVar(&o.faults, "fault", nil, "fault rule OPERATION:KNOB[,KNOB...], repeatable, e.g. 'lb.ensure:latency=200ms' or '*:rate=10/s,burst=20' (see docs/localcloud.md)")
	fs.Uint64Var(&o.faultSeed, "fault-seed", 1, "seed of the random draws behind latency distributions and error rates")
	fs.DurationVar(&o.healthInterval, "health-interval", 2*time.Second, "time between two health checks of a load balancer backend")
	fs.DurationVar(&o.healthTimeout, "health-timeout", time.Second, "timeout of one health check")
	fs.BoolVar(&o.disableHealthChecks, "disable-health-checks", false, "treat every backend as healthy (for node addresses that lead nowhere)")
	fs.DurationVar(&o.dialTimeout, "dial-timeout", 3*time.Second, "timeout of a data plane connection to a backend")
	fs.DurationVar(&o.udpIdleTimeout, "udp-idle-timeout", 30*time.Second, "a UDP session ends after this long without traffic")
	fs.IntVarP(&o.verbosity, "v", "v", 0, "log verbosity")
	fs.StringVar(&o.loggingFormat, "logging-format", "text", "log format: text or json")
	fs.BoolVar(&o.hosts, "hosts", false, "enable host instances: real hosts on this machine in namespaces on a bridge (needs root)")
	fs.StringVar(&o.bridge, "bridge", hosts.DefaultBridge, "with --hosts: the bridge the local cloud creates and attaches hosts to")
	fs.StringArrayVar(&o.guards, "guard-cidr", nil, "with --hosts: a CIDR that must never leave the machine (a cluster's pod or Service range), repeatable; routes to hosts may only send destinations inside one")
	fs.StringArrayVar(&o.peers, "peer", nil, "with --hosts: another local cloud's network on this machine, BRIDGE=CIDR (its bridge and instance range), whose hosts are nodes of the same cluster: traffic between the clouds' hosts passes; repeatable")
	fs.IntVar(&o.guardMetric, "guard-metric", hosts.DefaultGuardMetric, "with --hosts: the metric of the guard routes; local clouds that are peers and guard the same CIDRs need one each")
	fs.StringVar(&o.hostDir, "host-dir", "", "directory of the hosts' journal, namespace files and state directories (default: the state file's path + \".hosts\")")
	fs.DurationVar(&o.hostStopTimeout, "host-stop-timeout", hosts.DefaultStopTimeout, "with --hosts: how long a stopping host's boot command has after SIGTERM before every process of the host is killed")
	fs.StringVar(&o.volumeDir, "volume-dir", "", "directory of the volumes' files, sparse, one per volume (default: the state file's path + \".volumes\")")
	fs.StringVar(&o.maxVolumeSize, "max-volume-size", "1Ti", "the largest volume a create or expand may ask for, a quantity in whole MiB (\"64Gi\")")
	fs.IntVar(&o.volumeAttachLimit, "volume-attach-limit", api.DefaultVolumeAttachLimit, "how many volumes one instance takes")
	fs.BoolVar(&o.cleanup, "cleanup", false, "remove from this machine everything the host directory records (hosts, namespaces, mounts, bridge, routes, iptables chain, cgroups, host directories) and exit; for a cloud that was killed and will not be started again")
}

// readToken reads a bearer token from the file a flag names.
func readToken(flag, path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return "", fmt.Errorf("%s %s is empty", flag, path)
	}
	return token, nil
}

// config checks the options and turns them into a server configuration.
func (o *options) config(stderr io.Writer) (server.Config, error) {
	var cfg server.Config
	if o.state == "" {
		return cfg, errors.New("--state is required")
	}
	if o.token != "" {
		return cfg, errors.New("--token: a secret on the command line shows in /proc/*/cmdline to every user of the machine; write it to a file only you can read and give --token-file")
	}
	if o.tokenFile == "" {
		return cfg, errors.New("--token-file is required")
	}
	token, err := readToken("--token-file", o.tokenFile)
	if err != nil {
		return cfg, err
	}
	var ccmToken string
	if o.ccmTokenFile != "" {
		if ccmToken, err = readToken("--ccm-token-file", o.ccmTokenFile); err != nil {
			return cfg, err
		}
	}
	var csiToken string
	if o.csiTokenFile != "" {
		if csiToken, err = readToken("--csi-token-file", o.csiTokenFile); err != nil {
			return cfg, err
		}
	}
	var instanceCIDR netip.Prefix
	if o.instanceCIDR != "" {
		var err error
		if instanceCIDR, err = netip.ParsePrefix(o.instanceCIDR); err != nil {
			return cfg, fmt.Errorf("--instance-cidr: %w", err)
		}
		if o.hosts {
			if err := hosts.ValidateRange(instanceCIDR); err != nil {
				return cfg, fmt.Errorf("--instance-cidr: %w", err)
			}
		}
	}
	hostsCfg, err := o.hostsConfig()
	if err != nil {
		return cfg, err
	}
	var vipPool netip.Prefix
	if o.vipPool != "" {
		if vipPool, err = netip.ParsePrefix(o.vipPool); err != nil {
			return cfg, fmt.Errorf("--vip-pool: %w", err)
		}
	}
	var rules []api.Fault
	for _, f := range o.faults {
		rule, err := faults.ParseRule(f)
		if err != nil {
			return cfg, fmt.Errorf("--fault: %w", err)
		}
		rules = append(rules, rule)
	}
	if err := api.ValidateFaults(rules); err != nil {
		return cfg, fmt.Errorf("--fault: %w", err)
	}
	for name, d := range map[string]time.Duration{
		"--health-interval": o.healthInterval, "--health-timeout": o.healthTimeout,
		"--dial-timeout": o.dialTimeout, "--udp-idle-timeout": o.udpIdleTimeout,
	} {
		if d <= 0 {
			return cfg, fmt.Errorf("%s must be positive, got %s", name, d)
		}
	}
	log, err := newLogger(stderr, o.loggingFormat, o.verbosity)
	if err != nil {
		return cfg, err
	}
	maxVolume, err := resource.ParseQuantity(o.maxVolumeSize)
	if err != nil || maxVolume.Value() <= 0 || maxVolume.Value()%api.VolumeSizeUnit != 0 {
		return cfg, fmt.Errorf("--max-volume-size %q: want a positive quantity in whole MiB, such as 64Gi or 1Ti", o.maxVolumeSize)
	}
	if o.volumeAttachLimit < 1 {
		return cfg, fmt.Errorf("--volume-attach-limit %d: want at least 1", o.volumeAttachLimit)
	}
	cfg = server.Config{
		VolumeDir:         o.volumeDir,
		MaxVolumeSize:     maxVolume.Value(),
		VolumeAttachLimit: o.volumeAttachLimit,
		StatePath:         o.state,
		Listen:            o.listen,
		Token:             token,
		CCMToken:          ccmToken,
		CSIToken:          csiToken,
		ServingCAFile:     o.servingCAFile,
		Region:            o.region,
		Zones:             o.zones,
		InstanceType:      o.instanceType,
		InstanceCIDR:      instanceCIDR,
		VIPPool:           vipPool,
		Faults:            rules,
		FaultSeed:         o.faultSeed,
		Logger:            log,
		Hosts:             hostsCfg,
	}
	cfg.DataPlane.HealthInterval = o.healthInterval
	cfg.DataPlane.HealthTimeout = o.healthTimeout
	cfg.DataPlane.DisableHealthChecks = o.disableHealthChecks
	cfg.DataPlane.DialTimeout = o.dialTimeout
	cfg.DataPlane.UDPIdleTimeout = o.udpIdleTimeout
	return cfg, nil
}

// hostsConfig checks the host flags: nil without --hosts, which the other host flags
// then must not be given with.
func (o *options) hostsConfig() (*hosts.Config, error) {
	if !o.hosts {
		if len(o.guards) > 0 || len(o.peers) > 0 || o.bridge != hosts.DefaultBridge || o.hostStopTimeout != hosts.DefaultStopTimeout || o.guardMetric != hosts.DefaultGuardMetric {
			return nil, errors.New("--bridge, --guard-cidr, --guard-metric, --peer and --host-stop-timeout need --hosts")
		}
		return nil, nil
	}
	if err := hosts.ValidateBridgeName(o.bridge); err != nil {
		return nil, fmt.Errorf("--bridge: %w", err)
	}
	if o.hostStopTimeout <= 0 {
		return nil, fmt.Errorf("--host-stop-timeout must be positive, got %s", o.hostStopTimeout)
	}
	if o.guardMetric < 1 {
		return nil, fmt.Errorf("--guard-metric %d: want a positive route metric", o.guardMetric)
	}
	cfg := &hosts.Config{Dir: o.hostDir, Bridge: o.bridge, StopTimeout: o.hostStopTimeout, GuardMetric: o.guardMetric}
	for _, p := range o.peers {
		bridge, cidr, _ := strings.Cut(p, "=")
		r, err := netip.ParsePrefix(cidr)
		if err != nil || bridge == "" || !r.Addr().Is4() {
			return nil, fmt.Errorf("--peer %q: want BRIDGE=CIDR, such as nephele1=10.89.0.0/24", p)
		}
		if err := hosts.ValidateBridgeName(bridge); err != nil {
			return nil, fmt.Errorf("--peer %q: %w", p, err)
		}
		cfg.Peers = append(cfg.Peers, hosts.Peer{Bridge: bridge, Range: r})
	}
	for _, g := range o.guards {
		p, err := netip.ParsePrefix(g)
		if err != nil || !p.Addr().Is4() || p.Bits() == 0 {
			return nil, fmt.Errorf("--guard-cidr %q: want an IPv4 CIDR such as 10.244.0.0/16", g)
		}
		cfg.Guards = append(cfg.Guards, p)
	}
	return cfg, nil
}

// runCleanup removes what the host directory records.
func (o *options) runCleanup(ctx context.Context, stdout, stderr io.Writer) error {
	if o.state == "" && o.hostDir == "" {
		return errors.New("--cleanup needs --state or --host-dir")
	}
	dir := o.hostDir
	if dir == "" {
		dir = server.DefaultHostDir(o.state)
	}
	log, err := newLogger(stderr, o.loggingFormat, o.verbosity)
	if err != nil {
		return err
	}
	if err := hosts.Cleanup(ctx, dir, log); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "localcloud: cleaned up %s\n", dir)
	return nil
}

func newLogger(w io.Writer, format string, verbosity int) (logr.Logger, error) {
	opts := &slog.HandlerOptions{Level: slog.Level(-verbosity)}
	switch format {
	case "text", "":
		return logr.FromSlogHandler(slog.NewTextHandler(w, opts)), nil
	case "json":
		return logr.FromSlogHandler(slog.NewJSONHandler(w, opts)), nil
	}
	return logr.Discard(), fmt.Errorf("--logging-format %q: want text or json", format)
}

// run serves until ctx is done or serving fails.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := pflag.NewFlagSet("localcloud", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	o.flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.cleanup {
		if n := fs.NFlag(); n > 1+countSet(fs, "state", "host-dir", "v", "logging-format") {
			return errors.New("--cleanup takes no other flags but --state, --host-dir, -v and --logging-format")
		}
		return o.runCleanup(ctx, stdout, stderr)
	}
	cfg, err := o.config(stderr)
	if err != nil {
		return err
	}
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		return err
	}
	if o.addressFile != "" {
		if err := atomicfile.Write(o.addressFile, []byte(srv.Addr()+"\n"), 0o600); err != nil {
			return srv.Release(context.Background(), fmt.Errorf("--address-file: %w", err))
		}
		defer func() { _ = os.Remove(o.addressFile) }()
	}
	fmt.Fprintf(stdout, "localcloud serving on %s\n", srv.URL())

	select {
	case <-ctx.Done():
	case <-srv.Done():
	}
	stopIn := shutdownTimeout
	if cfg.Hosts != nil {
		stopIn += cfg.Hosts.StopTimeout // hosts get their time to stop
	}
	sctx, cancel := context.WithTimeout(context.Background(), stopIn)
	defer cancel()
	return errors.Join(srv.Err(), srv.Shutdown(sctx))
}

// countSet returns how many of the named flags were given.
func countSet(fs *pflag.FlagSet, names ...string) int {
	n := 0
	for _, name := range names {
		if fs.Changed(name) {
			n++
		}
	}
	return n
}
