// Package controllertest builds what the manager hands a controller's Spec.New, for
// the tests of the controller packages: a manager.ControllerContext on a fake
// clientset, with the cloud and configuration the test chooses.
package controllertest
