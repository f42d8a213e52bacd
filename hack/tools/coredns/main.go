// Command coredns is CoreDNS (github.com/coredns/coredns, the version go.mod pins) with
// only the plugins nephele's cluster DNS uses: the cluster's Corefile (localcluster's
// DNS add-on) serves cluster.local and the reverse zones from the Kubernetes API and
// answers every other name NXDOMAIN itself, since nothing may be asked outside the
// machine. It also links hosts, which upstream's DNS tests configure when they run this
// binary as a pod's name server (the e2e agnhost image carries it at /coredns, as
// upstream's does). Upstream's coredns.go links every plugin, including the clients of three
// clouds' DNS services; this build leaves them out, which makes it far smaller and
// quicker to compile. A Corefile naming a plugin not linked here fails at start with
// CoreDNS's "unknown directive" error.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/template"
)

func main() {
	coremain.Run()
}
