package localcluster

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestConfigComplete(t *testing.T) {
	valid := func() Config { return Config{Dir: "cluster", BinDir: "bin"} }
	tests := []struct {
		name   string
		change func(*Config)
		want   string // part of the error; empty for success
	}{
		{"defaults", func(*Config) {}, ""},
		{"no dir", func(c *Config) { c.Dir = "" }, "dir: Required value"},
		{"no bin dir", func(c *Config) { c.BinDir = "" }, "binDir: Required value"},
		{"too many nodes", func(c *Config) { c.Nodes = MaxNodes + 1 }, "want 1 to 20"},
		{"bad bridge", func(c *Config) { c.Bridge = "a bridge" }, "bridge name"},
		{"loopback instance range", func(c *Config) { c.InstanceCIDR = netip.MustParsePrefix("127.0.0.0/24") }, "outside 127.0.0.0/8"},
		{"instance range too small", func(c *Config) { c.InstanceCIDR = netip.MustParsePrefix("10.88.0.0/30"); c.Nodes = 2 }, "room for 1 host,"},
		{"several problems at once", func(c *Config) { c.Nodes = -1; c.CCM = "x" }, "[nodes: Invalid value: -1: want 1 to 20, ccm: Unsupported value"},
		{"cluster CIDR too small", func(c *Config) { c.ClusterCIDR = netip.MustParsePrefix("10.244.0.0/24") }, "larger than a /24"},
		{"cluster CIDR for too few nodes", func(c *Config) { c.ClusterCIDR = netip.MustParsePrefix("10.244.0.0/23"); c.Nodes = 3 }, "2 pod CIDRs"},
		// The nodes' sockets are at fixed paths inside each node, whatever the directory.
		{"long directory", func(c *Config) { c.Dir = "/tmp/" + strings.Repeat("d", 200) }, ""},
		{"kwok nodes", func(c *Config) { c.NodeMode = NodesKwok; c.Nodes = MaxKwokNodes }, ""},
		{"too many kwok nodes", func(c *Config) { c.NodeMode = NodesKwok; c.Nodes = MaxKwokNodes + 1 }, "nodes: Invalid value: 101: want 1 to 100 with kwok nodes"},
		{"kwok nodes off loopback", func(c *Config) { c.NodeMode = NodesKwok; c.InstanceCIDR = netip.MustParsePrefix("10.88.0.0/24") }, "instanceCIDR: Invalid value: \"10.88.0.0/24\": kwok nodes need a range inside 127.0.0.0/8"},
		{"kwok nodes with a bridge", func(c *Config) { c.NodeMode = NodesKwok; c.Bridge = "br0" }, "kwok nodes have no bridge"},
		{"kwok nodes with the CCM in the cluster", func(c *Config) { c.NodeMode = NodesKwok; c.CCM = CCMInCluster }, "kwok nodes run no pods"},
		{"unknown node mode", func(c *Config) { c.NodeMode = "vm" }, `nodeMode: Unsupported value: "vm"`},
		{"real nodes' VIP pool on loopback", func(c *Config) { c.VIPPool = netip.MustParsePrefix("127.100.0.0/16") }, "vipPool: Invalid value: \"127.100.0.0/16\": VIP pool 127.100.0.0/16: VIPs routed to hosts need a range outside 127.0.0.0/8"},
		{"real nodes' VIP pool elsewhere", func(c *Config) { c.VIPPool = netip.MustParsePrefix("10.99.0.0/24") }, ""},
		{"VIP pool over the instance range", func(c *Config) { c.VIPPool = netip.MustParsePrefix("10.88.7.0/24") }, "vipPool: Invalid value: \"10.88.7.0/24\": overlaps instanceCIDR"},
		{"kwok nodes' VIP pool off loopback", func(c *Config) { c.NodeMode = NodesKwok; c.VIPPool = netip.MustParsePrefix("10.99.0.0/24") }, "vipPool: Invalid value: \"10.99.0.0/24\": kwok nodes' load balancers are user-space proxies"},
		{"in-cluster replicas", func(c *Config) { c.CCM = CCMInCluster; c.CCMReplicas = 3 }, ""},
		{"operator replicas", func(c *Config) { c.CCM = CCMOperator; c.CCMReplicas = 3 }, ""},
		{"replicas of a process", func(c *Config) { c.CCMReplicas = 3 }, "only a CCM in the cluster"},
		{"volume attach limit", func(c *Config) { c.Volumes = true; c.VolumeAttachLimit = 40 }, ""},
		{"negative volume attach limit", func(c *Config) { c.VolumeAttachLimit = -1 }, "volumeAttachLimit: Invalid value: -1: want 0 (the cloud's default) or more"},
		{"volume attach limit with the operator", func(c *Config) { c.CCM = CCMOperator; c.VolumeAttachLimit = 40 }, "volumeAttachLimit: Invalid value: 40: nephele-operator's local profile"},
		{"unknown CCM mode", func(c *Config) { c.CCM = "sidecar" }, `ccm: Unsupported value: "sidecar": supported values: "process", "in-cluster", "operator"`},
		{"overlapping ranges", func(c *Config) { c.ServiceCIDR = netip.MustParsePrefix("10.244.128.0/20") }, "serviceCIDR: Invalid value: \"10.244.128.0/20\": overlaps clusterCIDR 10.244.0.0/16"},
		{"hybrid", func(c *Config) { c.Hybrid = &Hybrid{UnownedNode: true} }, ""},
		{"hybrid with kwok nodes", func(c *Config) { c.NodeMode = NodesKwok; c.Hybrid = &Hybrid{} }, "hybrid: Invalid value: \"set\": a hybrid cluster needs real nodes"},
		{"hybrid with the CCM in the cluster", func(c *Config) { c.CCM = CCMInCluster; c.Hybrid = &Hybrid{} }, "the CCM of a hybrid cluster runs as a process"},
		{"hybrid with too many nodes", func(c *Config) { c.Nodes = MaxNodes - 1; c.Hybrid = &Hybrid{UnownedNode: true} }, "hybrid.nodes: Invalid value: 1: want at least 1, and at most 20 nodes in all"},
		{"hybrid on the first cloud's bridge", func(c *Config) { c.Hybrid = &Hybrid{Bridge: "nephele0"} }, "hybrid.bridge: Invalid value: \"nephele0\": the first cloud's bridge"},
		{"hybrid range over the first's", func(c *Config) { c.Hybrid = &Hybrid{InstanceCIDR: netip.MustParsePrefix("10.88.128.0/24")} }, "hybrid.instanceCIDR: Invalid value: \"10.88.128.0/24\": overlaps instanceCIDR 10.88.0.0/16"},
		{"hybrid VIP pool over the pod range", func(c *Config) { c.Hybrid = &Hybrid{VIPPool: netip.MustParsePrefix("10.244.9.0/24")} }, "hybrid.vipPool: Invalid value: \"10.244.9.0/24\": overlaps clusterCIDR"},
		{"hybrid beyond the pod CIDRs", func(c *Config) {
			c.ClusterCIDR = netip.MustParsePrefix("10.244.0.0/22")
			c.Nodes = 3
			c.Hybrid = &Hybrid{Nodes: 1, UnownedNode: true}
		}, "hybrid.nodes: Invalid value: 1: 4 pod CIDRs of /24 in clusterCIDR 10.244.0.0/22, fewer than the 5 nodes of both clouds"},
		{"unowned node beyond the first range", func(c *Config) {
			c.InstanceCIDR = netip.MustParsePrefix("10.88.0.0/29")
			c.Nodes = 5
			c.Hybrid = &Hybrid{UnownedNode: true}
		}, "hybrid.unownedNode: Invalid value: true: instanceCIDR 10.88.0.0/29 has room for 5 hosts, fewer than the 5 nodes and the unowned node"},
		{"hybrid VIP pool on loopback", func(c *Config) { c.Hybrid = &Hybrid{VIPPool: netip.MustParsePrefix("127.9.0.0/24")} }, "hybrid.vipPool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(&c)
			err := c.complete()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("complete() = %v, want success", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("complete() = %v, want an error containing %q", err, tt.want)
			}
		})
	}

	c := valid()
	if err := c.complete(); err != nil {
		t.Fatal(err)
	}
	if c.Nodes != DefaultNodes || c.Bridge != "nephele0" || c.InstanceCIDR.String() != "10.88.0.0/16" ||
		c.ClusterCIDR.String() != "10.244.0.0/16" || c.ServiceCIDR.String() != "10.96.0.0/16" || c.VIPPool.String() != "10.89.0.0/16" || c.Progress == nil {
		t.Errorf("defaults: %+v", c)
	}
	h := valid()
	h.Hybrid = &Hybrid{}
	if err := h.complete(); err != nil {
		t.Fatal(err)
	}
	if *h.Hybrid != (Hybrid{Nodes: 1, Bridge: DefaultHybridBridge, InstanceCIDR: DefaultHybridRange, VIPPool: DefaultHybridVIPPool}) {
		t.Errorf("hybrid defaults: %+v", *h.Hybrid)
	}
	if !strings.HasSuffix(c.Dir, "/cluster") || !strings.HasPrefix(c.Dir, "/") {
		t.Errorf("Dir %q is not made absolute", c.Dir)
	}
}

// TestNodeZones: without volumes the cloud gives zones round-robin; with volumes, two
// nodes share each zone, so a pod and its volume can move between nodes of one zone.
func TestNodeZones(t *testing.T) {
	var c Config
	if z := c.nodeZone(0); z != "" {
		t.Errorf("without volumes: zone %q, want the cloud's choice", z)
	}
	c.Volumes = true
	var got []string
	for i := range 5 {
		got = append(got, c.nodeZone(i))
	}
	if want := []string{"local-a", "local-a", "local-b", "local-b", "local-c"}; !slices.Equal(got, want) {
		t.Errorf("zones %q, want %q", got, want)
	}
}
