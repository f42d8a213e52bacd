package manager_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
	"github.com/nephele-dev/nephele/internal/testkit/testnet"
	"github.com/nephele-dev/nephele/manager"
)

// upstreamProviderNames are the providers of the manifests below, registered in the test
// binary (runCCM) as the fake provider.
var upstreamProviderNames = []string{"aws", "openstack", "gce"}

// upstreamManifests are the container args of the cloud-controller-managers upstream
// providers document, verbatim, with what Kubernetes would substitute ($(VAR) from the
// container's env) written as the {{...}} placeholders below:
//   - aws: kubernetes/cloud-provider-aws
//     examples/existing-cluster/base/aws-cloud-controller-manager-daemonset.yaml
//     (63ec440c3275321b55afa45480e2fdfd2b0e93c4).
//   - openstack: kubernetes/cloud-provider-openstack
//     manifests/controller-manager/openstack-cloud-controller-manager-ds.yaml
//     (c453fb7c9bbb2091aee763d9d2809cc81fdf31c6); args[0] there is the binary, which the
//     image runs, so it is not an argument.
//   - gce: kubernetes/kubernetes cluster/gce/gci/configure-helper.sh,
//     start-cloud-controller-manager (b574b11f6b28f06e17333bb110e9374db3259bad), with
//     its conditional flags as a kubenet cluster sets them.
var upstreamManifests = map[string][]string{
	"aws": {
		"--v=2",
		"--cloud-provider=aws",
		"--use-service-account-credentials=true",
		"--configure-cloud-routes=false",
	},
	"openstack": {
		"--v=1",
		"--cluster-name=kubernetes",
		"--cloud-config={{cloud-config}}",
		"--cloud-provider=openstack",
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1",
	},
	"gce": {
		"--v=4",
		"--cloud-config={{cloud-config}}",
		"--secure-port=10258",
		"--use-service-account-credentials",
		"--cloud-provider=gce",
		"--concurrent-node-syncs=10",
		"--kubeconfig={{kubeconfig}}",
		"--authorization-kubeconfig={{kubeconfig}}",
		"--authentication-kubeconfig={{kubeconfig}}",
		"--cluster-name=kubernetes",
		"--cluster-cidr=10.64.0.0/14",
		"--concurrent-service-syncs=5",
		"--allocate-node-cidrs=true",
		"--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
		"--controllers=*",
	},
}

// TestUpstreamManifestsStart runs nephele's manager with the args of upstream providers'
// documented manifests and checks that it starts: it leads (without leading, no
// controller runs) and runs its cloud-node-controller. The test adds only what a process outside a pod needs: --kubeconfig
// where the manifest relies on the pod's in-cluster configuration, and a free
// --secure-port on loopback (a pod has a network namespace of its own, this test does
// not), after the manifest's own args so that they win.
func TestUpstreamManifestsStart(t *testing.T) {
	e := env(t)
	grantHeartbeats(t, e.Client) // two of the manifests run with --use-service-account-credentials
	dir := t.TempDir()
	cloudConfig := filepath.Join(dir, "cloud.conf")
	if err := os.WriteFile(cloudConfig, []byte("[Global]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, provider := range upstreamProviderNames {
		t.Run(provider, func(t *testing.T) {
			clearHeartbeats(t, e.Client)
			var args []string
			inCluster := true
			for _, a := range upstreamManifests[provider] {
				a = strings.NewReplacer("{{cloud-config}}", cloudConfig, "{{kubeconfig}}", e.Kubeconfig).Replace(a)
				if strings.HasPrefix(a, "--kubeconfig=") {
					inCluster = false
				}
				args = append(args, a)
			}
			if inCluster {
				args = append(args, "--kubeconfig="+e.Kubeconfig)
			}
			port := int(testnet.FreePort(t, "tcp", netip.MustParseAddr("127.0.0.1")))
			args = append(args, "--secure-port="+strconv.Itoa(port), "--bind-address=127.0.0.1")

			c := proctest.Start(t, "manager", args...)
			poll.Within(t, 90*time.Second, provider+"'s manifest to lead and run the cloud-node-controller", func() error {
				select {
				case <-c.Done():
					t.Fatalf("the manager exited (%v):\n%s", c.Err(), c.Output())
				default:
				}
				pids := runners(t, e.Client, 2*time.Second)[manager.CloudNodeController]
				if len(pids) != 1 || pids[0] != c.Pid() {
					return fmt.Errorf("cloud-node-controller runs in %v, want pid %d", pids, c.Pid())
				}
				return nil
			})
			c.Stop(t, stopTimeout)
		})
	}
}
