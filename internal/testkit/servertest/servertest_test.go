package servertest

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/nephele-dev/nephele/localcloud/api"
	"github.com/nephele-dev/nephele/localcloud/dataplane"
	"github.com/nephele-dev/nephele/localcloud/server"
)

func TestStartStopsWithTheTest(t *testing.T) {
	var url string
	t.Run("running", func(t *testing.T) {
		srv, c := Start(t, server.Config{
			VIPPool:   netip.MustParsePrefix("127.116.0.0/24"),
			DataPlane: dataplane.Config{DisableHealthChecks: true},
		})
		inst, err := c.CreateInstance(t.Context(), api.InstanceSpec{Name: "a"})
		if err != nil {
			t.Fatalf("the returned client cannot use the cloud: %v", err)
		}
		if inst.Name != "a" {
			t.Errorf("instance name = %q, want a", inst.Name)
		}
		url = srv.URL()
	})
	if url == "" {
		t.Fatal("the cloud did not start")
	}
	resp, err := http.Get(url + "/healthz")
	if err == nil {
		resp.Body.Close()
		t.Errorf("the cloud at %s still answers after its test ended: %s", url, resp.Status)
	}
}
