package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/clustertest"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
	"github.com/nephele-dev/nephele/internal/testkit/proctest"
)

// Bounds of the real-node test. A smoke run on two nodes takes about two and a half
// minutes on a two-core machine, most of it waiting for the node-loss checks; these
// bounds are generous so that load never fails the test.
const (
	realUpTimeout    = 3 * time.Minute  // --timeout: starting, and each smoke check
	realSmokeTimeout = 15 * time.Minute // the whole smoke run, start and stop included
)

// machineSysctls are the sysctls a real node could change on the machine: kubelet's
// (which the node runtime shows it in the host instead) and forwarding (which the local
// cloud turns on for its bridge only).
var machineSysctls = []string{
	"net/ipv4/ip_forward", "vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic",
	"kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// singleCloudChecks are checks every smoke run of a cluster of one cloud passes.
var singleCloudChecks = []string{
	"PASS pod-to-pod across nodes fails: no route in the cloud yet",
	"PASS pod-to-pod across nodes works through the routes",
	"PASS a route deleted behind the controller's back breaks pod-to-pod",
	"PASS the route controller's drift check restores it",
	"PASS HTTP through the VIP reaches pods on every node",
	"PASS the VIP keeps the client's address (ipMode VIP)",
	"PASS a pod reaches the Service through the VIP",
	"PASS kubectl logs shows a pod's log",
	"PASS kubectl exec runs a command in a pod",
	"PASS scaled to one replica, only its node is healthy and answers",
	"PASS the lifecycle controller deletes the terminated instance's Node",
	"PASS the pod comes back on another node",
	"PASS nephele migrate check passes",
	"PASS an unprivileged user reads no credential and plants nothing in the state directory",
	"PASS etcd answers no client without its certificate, and no pod reaches it",
	"PASS the registry takes no push or delete but nephele up's, from the machine or a pod",
	"PASS the CCM's cloud credential makes no instance and sets no fault; a pod without one gets 401",
}

// TestUpRealNodes runs `nephele up` on real nodes twice in one state directory: a run
// killed with SIGKILL, which leaves its hosts running on the machine, then a smoke run
// that must clean up after it and pass every check (pods on every node; pod-to-pod
// traffic failing without routes, working through the route controller's routes,
// failing when a route is deleted behind its back and working once its drift check
// restored it; a LoadBalancer Service with externalTrafficPolicy Local through the
// cloud's VIP and kube-proxy's health checks; kubectl logs and exec; a terminated
// instance's Node deleted and its pod back on another node), with the CCM as a process,
// in the cluster and managed by the operator, and then on a hybrid cluster of two local
// clouds and an unowned node (hybridChecks in localcluster/smoke). Afterwards the machine must
// be as before: namespaces, links, routes, mounts, iptables rules, cgroups, sysctls and
// processes.
func TestUpRealNodes(t *testing.T) {
	hoststest.RequireRoot(t)
	bin := clustertest.BinDir(t)
	dir := filepath.Join(t.TempDir(), "up")
	// The smoke run's refusal checks act as user nobody on the state directory: let nobody
	// reach it, as anyone reaches the default /var/lib/nephele/up, so that they try the
	// modes of its own files and directories rather than stop at the test's 0700 one.
	for _, d := range []string{filepath.Dir(dir), filepath.Dir(filepath.Dir(dir))} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// Ranges and a bridge of the test's own, so that it meets neither a `nephele up` of
	// the developer's nor the other packages' host tests.
	// The pod and Service ranges are the test's own too: two runs at once (a developer's
	// and CI's) would otherwise guard each other's routes.
	// clustertest's slots keep them apart from every other real-cluster test running.
	r := clustertest.NewRanges(t, "nphup")
	bridge, instanceRange, vipPool := r.Bridge, r.InstanceCIDR.String(), r.VIPPool.String()
	clusterCIDR, serviceCIDR := r.ClusterCIDR.String(), r.ServiceCIDR.String()
	// The hybrid run's second cloud: a slot of its own (its pod and Service ranges go
	// unused: the clouds share the first's).
	r2 := clustertest.NewRanges(t, "nphhy")
	markers := append(slices.Concat(r.Markers, r2.Markers), dir)
	before := hoststest.Snapshot(t, markers...)
	sysctls := readSysctls(t)

	args := []string{"up", "--dir", dir, "--bin-dir", bin, "--build=false", "--nodes", "2",
		"--bridge", bridge, "--instance-cidr", instanceRange, "--cluster-cidr", clusterCIDR,
		"--service-cidr", serviceCIDR, "--vip-pool", vipPool, "--timeout", realUpTimeout.String()}
	nephele := filepath.Join(bin, "nephele")

	t.Run("a killed run leaves its hosts behind", func(t *testing.T) {
		p := proctest.Exec(t, "nephele up", nephele, args...)
		p.WaitOutput(t, "Press Ctrl-C to stop.", realUpTimeout)
		p.Kill()
		out, err := exec.Command("ip", "netns", "list").Output()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), bridge+"-i-") {
			t.Errorf("no host of the killed run is left (ip netns list: %q): the next run's cleanup tests nothing", out)
		}
	})

	smoke := func(t *testing.T, extra []string, want ...string) {
		p := proctest.Exec(t, "nephele up", nephele, append(append(args, "--smoke"), extra...)...)
		start := time.Now()
		code := p.Wait(t, realSmokeTimeout)
		t.Logf("nephele up --smoke %s took %s:\n%s", strings.Join(extra, " "), time.Since(start).Round(time.Second), p.Output())
		if code != 0 {
			t.Fatalf("nephele up --smoke exited %d, want 0", code)
		}
		out := p.Output()
		want = append(want, "remove the hosts, keeping the nodes' logs")
		if !slices.Contains(extra, "--hybrid-nodes=1") {
			want = append(want, singleCloudChecks...)
		}
		for _, want := range want {
			if !strings.Contains(out, want) {
				t.Errorf("output does not contain %q", want)
			}
		}
		if strings.Contains(out, "FAIL") {
			t.Errorf("output reports a failure")
		}
	}
	t.Run("smoke passes after cleaning up the killed run", func(t *testing.T) {
		smoke(t, nil, "removed what a killed run left on the machine: 2 hosts", "start cloud-controller-manager",
			"install the CSI driver and the default StorageClass (kubectl apply)",
			"PASS a PVC of the default StorageClass is bound, mounted in a pod and written",
			"PASS the pod deleted and started on another node of the zone reads its data there",
			"PASS a StatefulSet of two replicas gets a volume each, each mounted and written",
			"PASS deleting the claims deletes their volumes in the cloud",
			"smoke: PASSED (32 checks)")
	})
	// The CCM as users install it: `nephele manifests` applied with kubectl, two
	// replicas pulling their image from the cluster's registry. Terminating a node may
	// take the leader with it; the other replica takes over.
	t.Run("smoke passes with the CCM in the cluster", func(t *testing.T) {
		// The volume checks ran above; the CCM's modes do not change them.
		smoke(t, []string{"--ccm=in-cluster", "--volumes=false"}, "install the cloud-controller-manager in the cluster (kubectl apply)", "2 replicas available", "smoke: PASSED (28 checks)")
	})
	// The CCM as nephele-operator manages it: the operator installed from its manifests,
	// a CloudControllerManager of the local platform with spec.volumes, the operator's
	// rendering running the CCM and the CSI driver.
	t.Run("smoke passes with the CCM and the CSI driver managed by the operator", func(t *testing.T) {
		smoke(t, []string{"--ccm=operator"}, "install nephele-operator and a CloudControllerManager (kubectl apply)", "CloudControllerManager cluster Available",
			"wait for the CSI driver nephele-operator runs (spec.volumes)",
			"PASS a PVC of the default StorageClass is bound, mounted in a pod and written",
			"PASS deleting the claims deletes their volumes in the cloud",
			"PASS the operator copies no Secret from outside its config namespace", "smoke: PASSED (33 checks)")
	})
	// A hybrid cluster (docs/hybrid.md): a second local cloud of one node, a peer of the
	// first, and a node that declares a platform nobody owns; one CCM for both clouds.
	t.Run("smoke passes on a hybrid cluster", func(t *testing.T) {
		smoke(t, []string{"--hybrid-nodes=1", "--unowned-node", "--hybrid-bridge", r2.Bridge,
			"--hybrid-instance-cidr", r2.InstanceCIDR.String(), "--hybrid-vip-pool", r2.VIPPool.String()},
			"start the second local cloud (hosts on "+r2.Bridge+", a peer of "+bridge+")",
			"PASS node node-b1 initialized by the CCM: local-b://",
			"PASS node node-unowned, which declares platform on-prem, is left alone",
			"PASS every node's pod CIDR routed in the cloud that owns the node, and in no other",
			"PASS pod-to-pod across nodes and clouds works through each cloud's routes: node-1 -> node-2, node-2 -> node-b1, node-b1 -> node-1",
			"PASS a LoadBalancer Service of each class gets a VIP of its own cloud",
			"PASS HTTP through each cloud's VIP reaches the demo pods",
			"PASS node node-unowned is still left alone",
			"smoke: PASSED (13 checks)")
	})

	assertNothingRuns(t, dir)
	if after := hoststest.Snapshot(t, markers...); after != before {
		t.Errorf("the machine changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := readSysctls(t); got != sysctls {
		t.Errorf("sysctls changed:\nbefore: %s\nafter:  %s", sysctls, got)
	}
}

func readSysctls(t *testing.T) string {
	t.Helper()
	var parts []string
	for _, s := range machineSysctls {
		parts = append(parts, s+"="+hoststest.Sysctl(t, s))
	}
	return strings.Join(parts, " ")
}
