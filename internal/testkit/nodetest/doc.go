// Package nodetest is the test fixture of the node controllers (nodeinit and
// nodelifecycle): the world a controller that watches Nodes and asks the cloud about
// their instances runs in, built once instead of once per controller.
//
// Fake is that world for unit tests: a fake clientset holding the test's Nodes, an
// informer factory on it, a fake cloud holding its instances, an in-memory event log
// and a metrics registry. Cluster is that world on a real control plane shared by a
// package's tests: a testenv.Scope (the test's own label, informers and event
// recorder), a fake cloud and a registry.
//
// Both hand their parts to the test, which builds its controller's Config from them: a
// package's internal tests cannot be imported, so the fixture cannot build the
// controller itself, and a test that sees the Config it passes reads better anyway.
//
//	f := nodetest.NewFake(t, instances, nodes...)
//	c, err := New(Config{Client: f.Client, Informers: f.Informers, Instances: f.Cloud,
//		Recorder: f.Events, Metrics: f.Metrics, Inventory: f.Inventory(t, nil)})
//	f.Start(t)
//	nodetest.Run(t, c.Run)
package nodetest
