package upstream

import (
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/nephele-dev/nephele/cloud"
)

// clientBuilder is the manager's cloud.ClientBuilder as upstream's
// ControllerClientBuilder.
type clientBuilder struct {
	clients cloud.ClientBuilder
	log     logr.Logger
}

var _ cloudprovider.ControllerClientBuilder = (*clientBuilder)(nil)

// Config implements cloudprovider.ControllerClientBuilder.
func (b *clientBuilder) Config(name string) (*rest.Config, error) { return b.clients.Config(name) }

// Client implements cloudprovider.ControllerClientBuilder.
func (b *clientBuilder) Client(name string) (kubernetes.Interface, error) {
	return b.clients.Client(name)
}

// ConfigOrDie implements cloudprovider.ControllerClientBuilder. It never returns nil: a
// failure is logged and panics with a message naming the client.
func (b *clientBuilder) ConfigOrDie(name string) *rest.Config {
	c, err := b.clients.Config(name)
	if err == nil && c == nil {
		err = fmt.Errorf("the client builder returned no config")
	}
	if err != nil {
		b.die("ConfigOrDie", name, err)
	}
	return c
}

// ClientOrDie implements cloudprovider.ControllerClientBuilder. It never returns nil: a
// failure is logged and panics with a message naming the client.
func (b *clientBuilder) ClientOrDie(name string) kubernetes.Interface {
	c, err := b.clients.Client(name)
	if err == nil && c == nil {
		err = fmt.Errorf("the client builder returned no client")
	}
	if err != nil {
		b.die("ClientOrDie", name, err)
	}
	return c
}

// die does what the upstream contract of the *OrDie methods asks, loudly: upstream's own
// builder calls klog.Fatal.
func (b *clientBuilder) die(method, name string, err error) {
	msg := fmt.Sprintf("upstream cloud provider: %s(%q) failed and cannot return an error: %v", method, name, err)
	b.log.Error(err, "The upstream provider asked for a client that cannot be built; panicking as *OrDie requires", "method", method, "client", name)
	panic(msg)
}
