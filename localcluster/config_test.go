package localcluster

import (
	"net/netip"
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
		{"no dir", func(c *Config) { c.Dir = "" }, "Dir is required"},
		{"no bin dir", func(c *Config) { c.BinDir = "" }, "BinDir is required"},
		{"too many nodes", func(c *Config) { c.Nodes = MaxNodes + 1 }, "want 1 to 20"},
		{"bad bridge", func(c *Config) { c.Bridge = "a bridge" }, "bridge name"},
		{"loopback instance range", func(c *Config) { c.InstanceCIDR = netip.MustParsePrefix("127.0.0.0/24") }, "outside 127.0.0.0/8"},
		{"instance range too small", func(c *Config) { c.InstanceCIDR = netip.MustParsePrefix("10.88.0.0/30"); c.Nodes = 2 }, "room for 1 host,"},
		{"cluster CIDR too small", func(c *Config) { c.ClusterCIDR = netip.MustParsePrefix("10.244.0.0/24") }, "larger than a /24"},
		{"cluster CIDR for too few nodes", func(c *Config) { c.ClusterCIDR = netip.MustParsePrefix("10.244.0.0/23"); c.Nodes = 3 }, "2 pod CIDRs"},
		{"dir too long for containerd's sockets", func(c *Config) { c.Dir = "/tmp/" + strings.Repeat("d", 40) }, "containerd takes; use a shorter directory"},
		{"in-cluster replicas", func(c *Config) { c.CCM = CCMInCluster; c.CCMReplicas = 3 }, ""},
		{"operator replicas", func(c *Config) { c.CCM = CCMOperator; c.CCMReplicas = 3 }, ""},
		{"replicas of a process", func(c *Config) { c.CCMReplicas = 3 }, "only a CCM in the cluster"},
		{"unknown CCM mode", func(c *Config) { c.CCM = "sidecar" }, `ccm "sidecar": want process, in-cluster or operator`},
		{"overlapping ranges", func(c *Config) { c.ServiceCIDR = netip.MustParsePrefix("10.244.128.0/20") }, "cluster CIDR 10.244.0.0/16 overlaps service CIDR"},
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
		c.ClusterCIDR.String() != "10.244.0.0/16" || c.ServiceCIDR.String() != "10.96.0.0/16" || c.Progress == nil {
		t.Errorf("defaults: %+v", c)
	}
	if !strings.HasSuffix(c.Dir, "/cluster") || !strings.HasPrefix(c.Dir, "/") {
		t.Errorf("Dir %q is not made absolute", c.Dir)
	}
}
