package controllertest

import (
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/internal/testkit/eventlog"
	"github.com/nephele-dev/nephele/manager"
)

// Context returns the ControllerContext the manager would give controller name with
// provider behind it and cfg as its settings: a fresh fake clientset and informer
// factory, an event log as the recorder, a fresh registry, a Progress that stalls after
// a minute and a logger that discards. There is no Inventory; set one when the test
// needs it.
func Context(name string, provider cloud.Provider, cfg manager.ControllerConfig) *manager.ControllerContext {
	client := fake.NewClientset()
	return &manager.ControllerContext{
		Name: name,
		ControllerDeps: manager.ControllerDeps{
			Client:    client,
			Informers: informers.NewSharedInformerFactory(client, 0),
			Recorder:  &eventlog.Log{},
			Logger:    logr.Discard(),
			Metrics:   prometheus.NewRegistry(),
			Health:    manager.NewProgress(name, time.Minute),
		},
		Cloud:  provider,
		Config: cfg,
	}
}
