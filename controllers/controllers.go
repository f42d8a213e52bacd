package controllers

import (
	"github.com/nephele-dev/nephele/controllers/loadbalancer"
	"github.com/nephele-dev/nephele/controllers/nodeinit"
	"github.com/nephele-dev/nephele/controllers/nodelifecycle"
	"github.com/nephele-dev/nephele/controllers/route"
	"github.com/nephele-dev/nephele/manager"
)

// Default returns the four cloud controllers under their upstream names and aliases, in
// the order the manager starts them.
func Default() []manager.ControllerSpec {
	return []manager.ControllerSpec{
		nodeinit.Spec(),
		nodelifecycle.Spec(),
		loadbalancer.Spec(),
		route.Spec(),
	}
}
