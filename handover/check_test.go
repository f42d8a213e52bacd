package handover_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/handover"
)

// movedFromKCM builds a cluster after a finished move from kube-controller-manager:
// Nodes with provider IDs, kube-controller-manager external, nephele holding its lease
// and the migration lease, a served LoadBalancer Service and one of another class.
// skip leaves out the parts a case replaces.
func movedFromKCM(c *cluster, skip ...string) {
	c.t.Helper()
	without := func(part string) bool {
		for _, s := range skip {
			if s == part {
				return false
			}
		}
		return true
	}
	c.node("cp1", "local://i-0001", false)
	c.node("worker-a", "local://i-0002", false)
	if without("kcm") {
		c.kubeadmControlPlane("v1.36.3", nil, []string{"--cloud-provider=external"})
	}
	c.lease("kube-controller-manager", "cp1_1d2e3f40", 2*time.Second)
	if without("nephele-lease") {
		c.lease("cloud-controller-manager", "cp1_9e8d7c6b", time.Second)
	}
	if without("migration-lease") {
		c.lease("cloud-provider-extraction-migration", "cp1_9e8d7c6b", time.Second)
	}
	c.service("web", "", true, "127.100.0.1")
	c.service("internal", "example.com/internal", false, "")
}

func runCheck(t *testing.T, c *cluster, o handover.CheckOptions) (*handover.Verdict, string) {
	t.Helper()
	v := handover.Check(c.survey(), o)
	var out bytes.Buffer
	if err := v.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	return v, out.String()
}

func TestCheckPasses(t *testing.T) {
	c := newCluster(t)
	movedFromKCM(c)
	c.node("worker-new", "", true) // registered a moment ago: not yet initialized, within the bound
	v, out := runCheck(t, c, handover.CheckOptions{From: handover.FromKubeControllerManager, Provider: "local"})
	if !v.Passed() {
		t.Fatalf("the check failed on a finished move:\n%s", out)
	}
	golden(t, "check-passes.txt", []byte(out))
}

func TestCheckFails(t *testing.T) {
	tests := []struct {
		name string
		// skip leaves parts of the finished move out; build adds the fault.
		skip  []string
		build func(c *cluster)
		// later surveys this long after the cluster was built: a bound must pass.
		later time.Duration
		opts  handover.CheckOptions
		// want is the one FAIL line, in part.
		want string
	}{
		{name: "a Node without a provider ID", build: func(c *cluster) { c.node("worker-b", "", false) },
			want: "FAIL  node/worker-b: no spec.providerID; fix: nephele sets it"},
		{name: "a Node of another cloud", build: func(c *cluster) { c.node("worker-b", "aws:///eu-west-1a/i-0abc", false) },
			want: "FAIL  node/worker-b: provider ID aws:///eu-west-1a/i-0abc is not local://…; fix: nephele's provider local does not know this instance"},
		{name: "a Node uninitialized too long", build: func(c *cluster) { c.node("worker-b", "", true) }, later: time.Hour,
			want: "FAIL  node/worker-b: uninitialized for 1h0m0s (bound 5m0s); fix: nephele's cloud-node-controller runs under lease kube-system/cloud-controller-manager"},
		{name: "a Service nobody took on", build: func(c *cluster) { c.service("orphan", "", false, "") },
			want: "FAIL  service/default/orphan: no service.kubernetes.io/load-balancer-cleanup finalizer"},
		{name: "a Service without an address", build: func(c *cluster) { c.service("pending", "", true, "") },
			want: "FAIL  service/default/pending: no address in status.loadBalancer.ingress"},
		{name: "a Service stuck in deletion", build: func(c *cluster) { c.service("gone", "", true, "127.100.0.2"); c.deleteService("gone") }, later: time.Hour,
			want: "FAIL  service/default/gone: deleted 1h0m0s ago and still held by the load-balancer-cleanup finalizer"},
		{name: "nephele never led", skip: []string{"nephele-lease", "migration-lease"},
			want: "FAIL  lease kube-system/cloud-controller-manager: does not exist: nephele has never led"},
		{name: "nephele stopped leading", skip: []string{"nephele-lease"},
			build: func(c *cluster) { c.lease("cloud-controller-manager", "cp1_9e8d7c6b", time.Minute) },
			want:  "FAIL  lease kube-system/cloud-controller-manager: stale, last renewed by cp1_9e8d7c6b 1m0s ago"},
		{name: "kube-controller-manager holds the migration lease", skip: []string{"migration-lease"},
			build: func(c *cluster) { c.lease("cloud-provider-extraction-migration", "cp1_1d2e3f40", time.Second) },
			want:  "FAIL  lease kube-system/cloud-provider-extraction-migration: held by cp1_1d2e3f40 (the holder of kube-system/kube-controller-manager), not by nephele"},
		{name: "kube-controller-manager keeps its in-tree provider", skip: []string{"kcm"},
			build: func(c *cluster) { c.kubeadmControlPlane("v1.30.2", nil, []string{"--cloud-provider=gce"}) },
			want:  "FAIL  static Pod kube-system/kube-controller-manager-cp1: kube-controller-manager still runs with the in-tree --cloud-provider=gce"},
		{name: "the old cloud-controller-manager still leads", skip: []string{"nephele-lease", "migration-lease"},
			build: func(c *cluster) {
				c.lease(handover.SeparateLease, "cp1_9e8d7c6b", time.Second)
				c.lease("cloud-controller-manager", "cp1_c4a3b2f1", time.Second)
			},
			opts: handover.CheckOptions{From: handover.FromCloudControllerManager, Leases: handover.Leases{Nephele: handover.SeparateLease}},
			want: "FAIL  lease kube-system/cloud-controller-manager: held by cp1_c4a3b2f1, renewed 1s ago: the old cloud-controller-manager still leads"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t)
			c.now = time.Now().Add(tt.later).Truncate(time.Second)
			movedFromKCM(c, tt.skip...)
			if tt.build != nil {
				tt.build(c)
			}
			o := tt.opts
			if o.Provider == "" {
				o.Provider = "local"
			}
			v, out := runCheck(t, c, o)
			if v.Passed() {
				t.Fatalf("the check passed; want %q:\n%s", tt.want, out)
			}
			var fails []string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "FAIL") {
					fails = append(fails, l)
				}
			}
			if len(fails) != 1 || !strings.HasPrefix(fails[0], tt.want) || !strings.Contains(fails[0], "; fix: ") {
				t.Fatalf("failures:\n%s\nwant one line starting %q, with a fix", strings.Join(fails, "\n"), tt.want)
			}
			if !strings.HasSuffix(out, "1 failed\n") {
				t.Errorf("output does not end with the count:\n%s", out)
			}
		})
	}
}

func TestCheckFailsWithEveryReason(t *testing.T) {
	c := newCluster(t)
	c.now = time.Now().Add(time.Hour).Truncate(time.Second)
	movedFromKCM(c, "kcm", "migration-lease")
	c.kubeadmControlPlane("v1.30.2", []string{"--cloud-provider=gce"}, []string{"--cloud-provider=gce", "--enable-leader-migration"})
	c.lease("cloud-provider-extraction-migration", "cp1_1d2e3f40", time.Second)
	c.node("worker-b", "", true)
	c.node("worker-c", "aws:///eu-west-1a/i-0abc", false)
	c.service("orphan", "", false, "")
	_, out := runCheck(t, c, handover.CheckOptions{From: handover.FromKubeControllerManager, Provider: "local"})
	golden(t, "check-fails.txt", []byte(out))
}
