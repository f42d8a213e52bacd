package localtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/cloudtest"
	"github.com/nephele-dev/nephele/internal/testkit/servertest"
	"github.com/nephele-dev/nephele/localcloud/server"
	"github.com/nephele-dev/nephele/providers/local"
)

// TestConformance runs nephele's conformance suite against the local provider over a
// real local cloud, with every capability and every fault the suite can induce, made
// by Fixture: the same code `nephele conformance --provider local` runs.
func TestConformance(t *testing.T) {
	srv, admin := servertest.Start(t, server.Config{FaultSeed: 1})
	cfg := local.Config{Endpoint: srv.URL(), Token: servertest.Token, RequestTimeout: 20 * time.Second}
	provider, err := local.NewFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The fixture from the provider's own configuration, as the CLI takes it.
	fx, err := Fixture(provider.Config())
	if err != nil {
		t.Fatal(err)
	}
	setup := cloudtest.Setup{
		NewProvider:  func(context.Context) (cloud.Provider, error) { return provider, nil },
		Capabilities: cloudtest.AllCapabilities(),
	}
	setup.Use(fx)
	rep := cloudtest.Run(t, setup)
	passed, failed, skipped := rep.Counts()
	if failed != 0 || skipped != 0 {
		var sb strings.Builder
		_ = rep.WriteText(&sb)
		t.Errorf("conformance: %d passed, %d failed, %d skipped; want every clause passed:\n%s", passed, failed, skipped, sb.String())
	}

	// The suite removes what it made, and the fault knobs are back as they were.
	ctx := context.Background()
	if insts, err := admin.ListAllInstances(ctx, 0); err != nil || len(insts) != 0 {
		t.Errorf("instances left after the suite: %d, %v", len(insts), err)
	}
	if lbs, err := admin.ListLoadBalancers(ctx, ""); err != nil || len(lbs) != 0 {
		t.Errorf("load balancers left after the suite: %d, %v", len(lbs), err)
	}
	if rs, err := admin.ListRoutes(ctx, cloudtest.DefaultClusterName); err != nil || len(rs) != 0 {
		t.Errorf("routes left after the suite: %v, %v", rs, err)
	}
	if rules, err := admin.Faults(ctx); err != nil || len(rules) != 0 {
		t.Errorf("fault rules left after the suite: %v, %v", rules, err)
	}
}
