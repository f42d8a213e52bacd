package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/manager/serving"
	"github.com/nephele-dev/nephele/operator/controllers"
	"github.com/nephele-dev/nephele/operator/install"
	"github.com/nephele-dev/nephele/operator/scheme"
)

// runOptions are the flags of `nephele-operator run`.
type runOptions struct {
	kubeconfig       string
	namespace        string
	operandNamespace string
	configNamespace  string
	version          string
	leaderElect      bool
	bindAddress      string
	securePort       int
	systemCABundle   string
	degradedAfter    time.Duration
}

func newRunCmd() *cobra.Command {
	o := runOptions{
		namespace: install.DefaultNamespace, operandNamespace: render.DefaultNamespace, configNamespace: install.DefaultConfigNamespace, version: images.DefaultVersion,
		leaderElect: true, securePort: install.SecurePort,
		systemCABundle: "/etc/ssl/certs/ca-certificates.crt", degradedAfter: controllers.DefaultDegradedAfter,
	}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "run the operator: reconcile the CloudControllerManager named cluster",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "kubeconfig file; empty uses the pod's ServiceAccount")
	fs.StringVar(&o.namespace, "namespace", o.namespace, "the operator's namespace, where its leader election Lease is")
	fs.StringVar(&o.operandNamespace, "operand-namespace", o.operandNamespace, "the cloud-controller-manager's namespace")
	fs.StringVar(&o.configNamespace, "config-namespace", o.configNamespace,
		"the one namespace spec.cloudConfig and spec.trustedCA may name; a source anywhere else is refused (SourceNotAllowed)")
	fs.StringVar(&o.version, "version", o.version, "the CCM version (image tag) run when the spec names none")
	fs.BoolVar(&o.leaderElect, "leader-elect", o.leaderElect, "elect one active operator among replicas")
	fs.StringVar(&o.bindAddress, "bind-address", o.bindAddress, "the IP address /metrics, /healthz and /readyz are served on; empty: every interface")
	fs.IntVar(&o.securePort, "secure-port", o.securePort,
		"the HTTPS port of /metrics (authenticated and authorized by the API server, as the CCM's) and of /healthz and /readyz (open); 0 turns it off")
	fs.StringVar(&o.systemCABundle, "system-ca-bundle", o.systemCABundle, "PEM bundle put first in the CCM's trusted CA bundle; a missing file adds nothing")
	fs.DurationVar(&o.degradedAfter, "degraded-after", o.degradedAfter, "how long transient errors last before Degraded")
	return cmd
}

func (o runOptions) run(cmd *cobra.Command) error {
	if err := install.ValidateConfigNamespace(o.configNamespace, o.operandNamespace); err != nil {
		return err
	}
	log := klog.NewKlogr()
	ctrl.SetLogger(log)
	var cfg *rest.Config
	var err error
	if o.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return fmt.Errorf("client configuration (--kubeconfig): %w", err)
	}
	bundle, err := os.ReadFile(o.systemCABundle)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("invalid value for --system-ca-bundle: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme.New(),
		Logger: log,
		Cache:  controllers.CacheOptions(o.operandNamespace),
		// Metrics and health are served by nephele's own secure server below, as the
		// CCM's are, not by controller-runtime's (which would bring in k8s.io/apiserver).
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        install.Name,
		LeaderElectionNamespace: o.namespace,
		// Release the Lease on a clean stop, once the controllers have stopped, so the
		// next replica takes over at once.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("create the controller manager: %w", err)
	}
	if err := controllers.Setup(mgr, controllers.Config{
		Namespace: o.operandNamespace, ConfigNamespace: o.configNamespace, Version: o.version, DegradedAfter: o.degradedAfter, SystemCABundle: bundle,
	}); err != nil {
		return err
	}
	// Either the manager or the server ending (the leader Lease lost, a serving error)
	// ends the other: a process that lost its Lease must exit, to be restarted as a
	// follower, not keep passing its health checks while reconciling nothing.
	ctx, cancel := context.WithCancel(ctrl.SetupSignalHandler())
	defer cancel()
	if o.securePort == 0 {
		return mgr.Start(ctx)
	}
	authn, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client for delegated authentication: %w", err)
	}
	srv, err := serving.New(serving.Config{BindAddress: o.bindAddress, Port: o.securePort, Authn: authn,
		Gatherer: crmetrics.Registry, Logger: log.WithName("serving")})
	if err != nil {
		return err
	}
	// Ready once the cache has synced: before, the operator acts on nothing.
	if err := srv.AddReadyzChecks(serving.Check{Name: "informer-sync", Fn: func(r *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(r.Context()) {
			return errors.New("the cache has not synced")
		}
		return nil
	}}); err != nil {
		return err
	}
	errs := make(chan error, 2)
	go func() { errs <- srv.Serve(ctx) }()
	go func() { errs <- mgr.Start(ctx) }()
	err = <-errs
	cancel()
	if err2 := <-errs; err == nil {
		err = err2
	}
	return err
}
