package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/conformance"
	"github.com/nephele-dev/nephele/internal/atomicfile"
	"github.com/nephele-dev/nephele/providers/local"
	"github.com/nephele-dev/nephele/providers/local/localtest"
)

// conformanceOptions are the flags of `nephele conformance`.
type conformanceOptions struct {
	provider       string
	cloudConfig    string
	junit          string
	clusterName    string
	faultInjection bool
	callTimeout    time.Duration
}

func newConformanceCommand() *cobra.Command {
	o := conformanceOptions{clusterName: "nephele-conformance", faultInjection: true, callTimeout: conformance.DefaultCallTimeout}
	cmd := &cobra.Command{
		Use:   "conformance --provider NAME --cloud-config FILE [--junit FILE]",
		Short: "Check a cloud provider against the provider contract",
		Long: `conformance runs nephele's conformance suite (docs/conformance.md) against a cloud
provider compiled into nephele and the cloud its --cloud-config points at. It creates a
few test instances, load balancers and routes named "ct-<random>-…", checks every clause
of the provider contract, removes what it created, prints PASS, FAIL or SKIP per clause
and exits non-zero when any clause fails. --junit writes the results as JUnit XML for CI
dashboards.

With --fault-injection (the default) it also turns the cloud's fault knobs (rate limits,
latency) for a moment to check throttling and deadlines; turn it off for a cloud that a
live cluster uses.

Providers: ` + strings.Join(conformanceRegistry().Names(), ", "),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runConformance(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.provider, "provider", "", "name of the cloud provider to check (required)")
	f.StringVar(&o.cloudConfig, "cloud-config", "", "the provider's cloud config file, as given to its cloud-controller-manager")
	f.StringVar(&o.junit, "junit", "", "write the results as JUnit XML to this file")
	f.StringVar(&o.clusterName, "cluster-name", o.clusterName, "cluster name of the test load balancers and routes")
	f.BoolVar(&o.faultInjection, "fault-injection", o.faultInjection, "turn the cloud's fault knobs (rate limit, latency) to check throttling and deadlines")
	f.DurationVar(&o.callTimeout, "call-timeout", o.callTimeout, "bound on one call to the provider")
	_ = cmd.MarkFlagRequired("provider")
	return cmd
}

// conformanceRegistry holds the providers compiled into nephele.
func conformanceRegistry() *cloud.Registry {
	r := cloud.NewRegistry()
	_ = local.Register(r) // cannot fail on a fresh registry
	return r
}

func runConformance(ctx context.Context, stdout, stderr io.Writer, o conformanceOptions) error {
	registry := conformanceRegistry()
	if !slices.Contains(registry.Names(), o.provider) {
		return fmt.Errorf("conformance: unknown provider %q: this nephele has %s", o.provider, strings.Join(registry.Names(), ", "))
	}
	if o.callTimeout <= 0 {
		return fmt.Errorf("conformance: --call-timeout %s: must be positive", o.callTimeout)
	}
	var config []byte
	if o.cloudConfig != "" {
		b, err := os.ReadFile(o.cloudConfig)
		if err != nil {
			return fmt.Errorf("conformance: --cloud-config: %w", err)
		}
		config = b
	}
	if o.junit != "" {
		// Fail before the run, not after it, when the report cannot be written.
		if err := checkReportDir(filepath.Dir(o.junit)); err != nil {
			return fmt.Errorf("conformance: --junit %s: %w", o.junit, err)
		}
	}

	// The provider is built once: the suite checks the same one it was set up from,
	// and a provider that cannot be built is the failed clause provider/new.
	var r io.Reader
	if config != nil {
		r = bytes.NewReader(config)
	}
	provider, buildErr := registry.New(o.provider, r)
	setup := conformance.Setup{
		NewProvider: func(context.Context) (cloud.Provider, error) { return provider, buildErr },
		ClusterName: o.clusterName,
		CallTimeout: o.callTimeout,
		OnResult: func(r conformance.Result) {
			fmt.Fprintf(stderr, "%s %s (%s)\n", r.Status, r.Clause, r.Duration.Round(time.Millisecond))
		},
	}
	if buildErr == nil {
		// The capabilities claimed are those the provider reports: the command checks
		// what a provider has, and the suite checks each of them.
		setup.Capabilities = capabilitiesOf(provider)
		fx, err := fixtureOf(ctx, provider)
		if err != nil {
			return fmt.Errorf("conformance: provider %s: %w", o.provider, err)
		}
		setup.Use(fx)
	}
	if !o.faultInjection {
		// Added to the fixture's own skips, which stay.
		setup.Throttling, setup.Slow = nil, nil
		setup.Use(conformance.Fixture{Skip: map[string]string{
			"errors/throttled-retry-after": "--fault-injection=false: the cloud is not throttled on purpose",
			"context/deadline":             "--fault-injection=false: the cloud is not slowed on purpose",
		}})
	}

	fmt.Fprintf(stderr, "Checking provider %s against the provider contract\n", o.provider)
	rep, err := conformance.RunSuite(ctx, setup)
	if err != nil {
		return fmt.Errorf("conformance: %w", err)
	}
	if o.junit != "" {
		if err := writeReport(o.junit, rep.WriteJUnit); err != nil {
			return fmt.Errorf("conformance: writing the JUnit report: %w", err)
		}
	}
	if err := rep.WriteText(stdout); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("conformance: interrupted: %w", context.Cause(ctx))
	}
	if _, failed, _ := rep.Counts(); failed > 0 {
		return fmt.Errorf("conformance: provider %s fails %d of %d clauses", o.provider, failed, len(rep.Results))
	}
	return nil
}

// fixtureOf returns the fixture for provider: its own when it implements
// conformance.FixtureProvider, nephele's built-in one for the providers it carries, or
// none (the clauses that need instances or faults are then skipped, saying why).
func fixtureOf(ctx context.Context, provider cloud.Provider) (conformance.Fixture, error) {
	switch p := provider.(type) {
	case conformance.FixtureProvider:
		return p.ConformanceFixture(ctx)
	case *local.Provider:
		return localtest.Fixture(p.Config())
	}
	return conformance.Fixture{}, nil
}

// capabilitiesOf returns the capabilities p reports.
func capabilitiesOf(p cloud.Provider) []conformance.Capability {
	var out []conformance.Capability
	if v, ok := p.Instances(); ok && v != nil {
		out = append(out, conformance.Instances)
	}
	if v, ok := p.InstanceLister(); ok && v != nil {
		out = append(out, conformance.InstanceLister)
	}
	if v, ok := p.LoadBalancers(); ok && v != nil {
		out = append(out, conformance.LoadBalancers)
	}
	if v, ok := p.Routes(); ok && v != nil {
		out = append(out, conformance.Routes)
	}
	return out
}

func checkReportDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// writeReport writes path whole (atomicfile), so that a CI job never reads a
// half-written report.
func writeReport(path string, write func(io.Writer) error) error {
	return atomicfile.WriteFunc(path, 0o644, write)
}
