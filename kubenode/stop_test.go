package kubenode_test

import (
	"testing"
	"time"

	"github.com/nephele-dev/nephele/kubenode"
	"github.com/nephele-dev/nephele/localcloud/hosts"
)

// TestShutdownBudgetFitsTheHostStopTimeout: a local cloud host with the default stop
// timeout gives the node runtime all the time its stop may take, with a margin for the
// runtime's own start and exit.
func TestShutdownBudgetFitsTheHostStopTimeout(t *testing.T) {
	const margin = 10 * time.Second
	if kubenode.ShutdownBudget+margin > hosts.DefaultStopTimeout {
		t.Errorf("a node's stop may take %s, more than %s less than the hosts' default stop timeout %s: a loaded node is killed mid-stop",
			kubenode.ShutdownBudget, margin, hosts.DefaultStopTimeout)
	}
}
