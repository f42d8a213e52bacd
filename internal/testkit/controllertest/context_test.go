package controllertest

import (
	"testing"

	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/manager"
)

func TestContext(t *testing.T) {
	fc, err := fakecloud.New(fakecloud.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := manager.ControllerConfig{ClusterName: "prod"}
	cc := Context(manager.NodeRouteController, fc, cfg)
	if cc.Name != manager.NodeRouteController || cc.Cloud != fc || cc.Config.ClusterName != "prod" {
		t.Errorf("Context = %+v, want the name, cloud and config given", cc)
	}
	if cc.Client == nil || cc.Informers == nil || cc.Recorder == nil || cc.Metrics == nil || cc.Health == nil || cc.Inventory != nil {
		t.Errorf("Context = %+v, want every part but the Inventory set", cc)
	}
	if other := Context(manager.NodeRouteController, fc, cfg); other.Client == cc.Client || other.Metrics == cc.Metrics {
		t.Error("two Contexts share a clientset or a registry")
	}
}
