package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/manager/features"
	"github.com/nephele-dev/nephele/manager/serving"
)

// Component is the name this manager uses in leader migration configurations and
// Lease identities, as upstream's cloud-controller-manager does.
const Component = "cloud-controller-manager"

// NewCommand returns the command of a cloud-controller-manager binary named name, able
// to run the providers in registry and the controllers in specs. Invalid flags make it
// fail before anything starts, with one line per problem naming the flag.
func NewCommand(name string, registry *cloud.Registry, specs []ControllerSpec) *cobra.Command {
	o := NewOptions()
	cmd := &cobra.Command{
		Use:   name,
		Short: "Run the Kubernetes cloud controllers for a cloud provider",
		Long: name + ` runs the cloud-specific control loops of Kubernetes (node initialization,
node lifecycle, service load balancers and routes) out of tree. Flags keep the upstream
cloud-controller-manager's names and meanings; where nephele changes a default or adds a
flag, its help says "(nephele: ...)".

Cloud providers in this binary: ` + fmt.Sprint(registry.Names()),
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printed := printVersion(cmd.OutOrStdout(), o.Version); printed {
				return nil
			}
			cfg, err := o.Complete(specs)
			if err != nil {
				return err
			}
			lo := LoggerOptions{Out: cmd.ErrOrStderr(), Format: o.LoggingFormat, Verbosity: o.Verbosity, VModule: o.VModule}
			if o.LogTextSplitStream && o.LoggingFormat != LogFormatJSON || o.LogJSONSplitStream && o.LoggingFormat == LogFormatJSON {
				lo.Out, lo.ErrOut = cmd.OutOrStdout(), cmd.ErrOrStderr()
			}
			log, err := NewLoggerWithOptions(lo)
			if err != nil {
				return err
			}
			if o.Profiling && o.ContentionProfiling {
				// As upstream: the whole process records blocking and lock contention
				// for /debug/pprof/block and /debug/pprof/mutex.
				goruntime.SetBlockProfileRate(1)
				goruntime.SetMutexProfileFraction(1)
			}
			// client-go logs through klog; send it to the same structured sink at the
			// same verbosity.
			klog.SetLogger(log)
			log.Info("Garbage collector target", "gcPercent", tuneGC())
			klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
			klog.InitFlags(klogFlags)
			_ = klogFlags.Set("v", strconv.Itoa(o.Verbosity))
			// klog filters V(n) calls itself before they reach the sink: give it
			// --vmodule too, so that it raises client-go's and hosted providers' logs.
			if err := klogFlags.Set("vmodule", o.VModule); err != nil {
				return fmt.Errorf("invalid value for --vmodule: %q: %w", o.VModule, err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Run(logr.NewContext(ctx, log), cfg, registry)
		},
	}
	o.AddFlags(cmd.Flags())
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return flagError(err) })
	return cmd
}

// flagError rewrites pflag's parse errors in the manager's form, one line naming the
// flag: an unknown flag says that neither upstream nor nephele has it (every flag of
// upstream's cloud-controller-manager is accepted or refused by name, with a reason),
// and a value that does not parse says "invalid value for --flag".
func flagError(err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: "); ok {
		return fmt.Errorf("unknown flag %s: neither upstream's cloud-controller-manager (%s) nor nephele has it; "+
			"--help lists the flags, docs/manager.md where nephele differs", name, features.Version)
	}
	if rest, ok := strings.CutPrefix(msg, "unknown shorthand flag: "); ok {
		return fmt.Errorf("unknown shorthand flag %s: neither upstream's cloud-controller-manager nor nephele has it; --help lists the flags", rest)
	}
	// pflag: invalid argument "VALUE" for "--flag" flag: REASON
	if rest, ok := strings.CutPrefix(msg, "invalid argument "); ok {
		if value, after, ok := cutQuoted(rest); ok {
			if flagPart, reason, ok := strings.Cut(after, " flag: "); ok {
				name := strings.Trim(strings.TrimSpace(strings.TrimPrefix(flagPart, "for")), `"`)
				if i := strings.LastIndex(name, "--"); i >= 0 {
					name = name[i:]
				}
				return fmt.Errorf("invalid value for %s: %q: %s", name, value, reason)
			}
		}
	}
	return err
}

// cutQuoted splits s, which starts with a Go-quoted string, into that string unquoted
// and what follows it.
func cutQuoted(s string) (value, rest string, ok bool) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", false
	}
	v, err := strconv.Unquote(q)
	if err != nil {
		return "", "", false
	}
	return v, s[len(q):], true
}

// printVersion prints the version as upstream's --version does ("true": the version,
// "raw": every field) and reports whether it did, in which case the command stops.
func printVersion(w io.Writer, flag string) bool {
	info := version.Get()
	switch flag {
	case "true":
		fmt.Fprintf(w, "Kubernetes %s\n", info.GitVersion)
	case "raw":
		fmt.Fprintf(w, "%#v\n", info)
	default:
		return false
	}
	return true
}

// Execute runs cmd and returns the process exit code, printing errors one per line
// to cmd's error stream. Binaries call os.Exit(manager.Execute(cmd)).
func Execute(cmd *cobra.Command) int {
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "error:", err)
		return 1
	}
	return 0
}

// Run runs the manager with cfg, from Options.Complete, until ctx is done. It returns
// nil after a graceful stop: controllers stopped, work drained, leases released. The
// logger is taken from ctx.
func Run(ctx context.Context, cfg CompletedConfig, registry *cloud.Registry) error {
	if cfg.completedConfig == nil {
		return errors.New("manager.Run: the configuration was not completed: build it with Options.Complete")
	}
	if registry == nil {
		return errors.New("manager.Run: no provider registry")
	}
	log := logr.FromContextOrDiscard(ctx)
	o := &cfg.options
	minQPS, maxQPS := o.CloudQPSBounds()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := newManagerMetrics(reg)
	if err != nil {
		return fmt.Errorf("registering the manager's metrics: %w", err)
	}
	restConfig, err := apiserverConfig(o)
	if err != nil {
		return err
	}
	// Every apiserver client copies this configuration, so all their requests are
	// measured: the controllers', the informers', leader election's.
	restConfig.Wrap(metrics.wrapTransport)

	plans, err := buildClouds(cfg, registry)
	if err != nil {
		return err
	}

	server, err := newServer(ctx, o, restConfig, reg, log)
	if err != nil {
		return err
	}

	identity, err := leaseIdentity()
	if err != nil {
		return err
	}
	p := &runPlan{
		component:   Component,
		restConfig:  restConfig,
		clouds:      plans,
		specs:       cfg.specs,
		owned:       cfg.controllerPlan.Owned,
		migrated:    cfg.controllerPlan.Migrated,
		leaderElect: o.LeaderElect,
		mainLease: LeaseConfig{
			Namespace:     o.LeaderElectResourceNamespace,
			Name:          o.LeaderElectResourceName,
			Identity:      identity,
			LeaseDuration: o.LeaderElectLeaseDuration,
			RenewDeadline: o.LeaderElectRenewDeadline,
			RetryPeriod:   o.LeaderElectRetryPeriod,
		},
		cloudCall:          cloudCallConfig{timeout: o.CloudCallTimeout, qps: o.CloudQPS, minQPS: minQPS, maxQPS: maxQPS, burst: o.CloudBurst, maxRetryAfter: o.CloudMaxRetryAfter},
		stallTimeout:       o.HealthzStallTimeout,
		startInterval:      o.ControllerStartInterval,
		useServiceAccounts: o.UseServiceAccountCredentials,
		resync:             o.MinResyncPeriod,
		registry:           reg,
		metrics:            metrics,
		server:             server,
	}
	if cfg.leaderMigration != nil {
		ml := p.mainLease
		ml.Name = cfg.leaderMigration.LeaderName
		p.migrationLease = &ml
	}
	for _, name := range cfg.controllerPlan.Unowned {
		log.Info("Controller left to another component by the leader migration configuration", "controller", name)
	}

	rt, err := newRuntime(p, log)
	if err != nil {
		if server != nil {
			server.Close()
		}
		return err
	}

	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	serveErr := make(chan error, 1)
	if server != nil {
		log.Info("Serving", "address", server.Addr().String())
		go func() { serveErr <- server.Serve(serveCtx) }()
	} else {
		serveErr <- nil
	}
	runErr := rt.run(ctx)
	// Health and metrics stay up until the controllers have drained and the leases
	// are released, so a probe never sees a half-stopped manager as healthy-and-gone.
	stopServing()
	if err := <-serveErr; err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("serving: %w", err))
	}
	if runErr == nil {
		log.Info("Stopped")
	}
	return runErr
}

// newServer builds the secure serving endpoints, or returns nil when --secure-port is 0.
func newServer(ctx context.Context, o *Options, restConfig *rest.Config, reg *prometheus.Registry, log logr.Logger) (*serving.Server, error) {
	if o.SecurePort == 0 {
		return nil, nil
	}
	authnConfig := restConfig
	if o.AuthenticationKubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", o.AuthenticationKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("invalid value for --authentication-kubeconfig: %w", err)
		}
		authnConfig = c
	}
	authn, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(authnConfig), Component+"/delegated-auth"))
	if err != nil {
		return nil, fmt.Errorf("building the delegated authentication client: %w", err)
	}
	cfg, err := o.servingConfig()
	if err != nil {
		return nil, err
	}
	if !o.AuthenticationSkipLookup {
		if err := lookupAuthentication(ctx, authn, &cfg, o.AuthenticationTolerateLookupFailure, log.WithName("serving")); err != nil {
			return nil, err
		}
	}
	cfg.Authn, cfg.Gatherer, cfg.Logger = authn, reg, log.WithName("serving")
	s, err := serving.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("invalid value for --secure-port or the TLS flags: %w", err)
	}
	return s, nil
}

// leaseIdentity is the host name plus a random suffix, as upstream does, so two
// replicas on one host (or a restarted pod with the same name) never share an identity.
func leaseIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("reading the host name for the lease identity: %w", err)
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating the lease identity: %w", err)
	}
	return host + "_" + hex.EncodeToString(b), nil
}

// apiserverConfig is the connection every apiserver client of the manager copies:
// --master and --kubeconfig, the content type and the client-side limit. A negative
// --kube-api-qps leaves client-go without a rate limiter, so the apiserver's API Priority
// and Fairness is the only bound besides each controller's worker count.
func apiserverConfig(o *Options) (*rest.Config, error) {
	c, err := clientcmd.BuildConfigFromFlags(o.Master, o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("invalid value for --kubeconfig: %w", err)
	}
	c.QPS = o.KubeAPIQPS
	c.Burst = o.KubeAPIBurst
	c.ContentType = o.KubeAPIContentType
	return c, nil
}
