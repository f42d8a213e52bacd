package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/localcluster"
)

func validOptions(t *testing.T) upOptions {
	t.Helper()
	return upOptions{
		dir: "state", binDir: t.TempDir(), nodes: 3, kwok: true, ccm: "process", serviceCIDR: "10.96.0.0/16",
		vipPool: "127.100.0.0/16", instanceCIDR: "127.200.0.0/16", clusterCIDR: "10.244.0.0/16", timeout: time.Minute,
	}
}

// validRealOptions are the flags of a run on real nodes with the defaults.
func validRealOptions(t *testing.T) upOptions {
	t.Helper()
	o := validOptions(t)
	o.kwok, o.instanceCIDR, o.vipPool = false, "", ""
	return o
}

// TestConfigChecksFlags checks that every bad flag value is refused before anything
// starts, with a line naming the flag (localcluster's field errors in up's terms).
func TestConfigChecksFlags(t *testing.T) {
	tests := []struct {
		name   string
		real   bool
		change func(*upOptions)
		want   string // part of the error; empty for success
	}{
		{"defaults", false, func(*upOptions) {}, ""},
		{"no nodes", false, func(o *upOptions) { o.nodes = 0 }, "--nodes 0: want at least 1"},
		{"too many nodes", false, func(o *upOptions) { o.nodes = localcluster.MaxKwokNodes + 1 }, "want 1 to 100"},
		{"zero timeout", false, func(o *upOptions) { o.timeout = 0 }, "--timeout"},
		{"bad VIP pool", false, func(o *upOptions) { o.vipPool = "127.100.0.0" }, "--vip-pool"},
		{"kwok VIP pool outside loopback", false, func(o *upOptions) { o.vipPool = "10.0.0.0/24" }, "--vip-pool 10.0.0.0/24: kwok nodes' load balancers are user-space proxies on VIPs inside 127.0.0.0/8"},
		{"IPv6 instance range", false, func(o *upOptions) { o.instanceCIDR = "::1/128" }, "--instance-cidr"},
		{"instance range too small", false, func(o *upOptions) { o.instanceCIDR = "127.200.0.0/30"; o.nodes = 3 }, "--instance-cidr 127.200.0.0/30: room for 2 nodes, fewer than 3"},
		{"instance range just big enough", false, func(o *upOptions) { o.instanceCIDR = "127.200.0.0/29"; o.nodes = 6 }, ""},
		{"bad cluster CIDR", false, func(o *upOptions) { o.clusterCIDR = "10.244.0.0" }, "--cluster-cidr"},
		{"overlapping ranges", false, func(o *upOptions) { o.serviceCIDR = "10.244.128.0/20" }, "--service-cidr 10.244.128.0/20: overlaps --cluster-cidr 10.244.0.0/16"},
		{"bridge with --kwok", false, func(o *upOptions) { o.bridge = "br0" }, "--bridge br0: kwok nodes have no bridge"},
		{"in-cluster CCM with --kwok", false, func(o *upOptions) { o.ccm = "in-cluster" }, "--ccm in-cluster: kwok nodes run no pods"},
		{"real defaults", true, func(*upOptions) {}, ""},
		{"too many real nodes", true, func(o *upOptions) { o.nodes = localcluster.MaxNodes + 1 }, "want 1 to 20"},
		{"loopback instance range", true, func(o *upOptions) { o.instanceCIDR = "127.200.0.0/16" }, "outside 127.0.0.0/8"},
		{"real instance range too small", true, func(o *upOptions) { o.instanceCIDR = "10.88.0.0/31" }, "at most a /30"},
		{"bad bridge", true, func(o *upOptions) { o.bridge = "a-bridge-name-too-long" }, "--bridge"},
		{"real VIP pool on loopback", true, func(o *upOptions) { o.vipPool = "127.100.0.0/16" }, "--vip-pool 127.100.0.0/16: VIP pool 127.100.0.0/16: VIPs routed to hosts need a range outside 127.0.0.0/8"},
		{"real VIP pool over the Service range", true, func(o *upOptions) { o.vipPool = "10.96.0.0/24" }, "--vip-pool 10.96.0.0/24: overlaps --service-cidr 10.96.0.0/16"},
		{"real VIP pool elsewhere", true, func(o *upOptions) { o.vipPool = "10.99.0.0/24" }, ""},
		{"bad service CIDR", true, func(o *upOptions) { o.serviceCIDR = "ten" }, "--service-cidr"},
		{"in-cluster CCM", true, func(o *upOptions) { o.ccm = "in-cluster" }, ""},
		{"operator CCM", true, func(o *upOptions) { o.ccm = "operator" }, ""},
		{"unknown CCM mode", true, func(o *upOptions) { o.ccm = "sidecar" }, `--ccm sidecar: supported values: "process", "in-cluster", "operator"`},
		{"e2e", true, func(o *upOptions) { o.e2e = e2eOptions{run: true, parallel: 3, timeout: time.Hour, network: true} }, ""},
		{"e2e with --kwok", false, func(o *upOptions) { o.e2e = e2eOptions{run: true, parallel: 3, timeout: time.Hour} }, "--e2e: not with --smoke or --kwok"},
		{"e2e with --smoke", true, func(o *upOptions) { o.e2e = e2eOptions{run: true, parallel: 3, timeout: time.Hour}; o.smoke = true }, "--e2e: not with --smoke or --kwok"},
		{"e2e with every suite off", true, func(o *upOptions) {
			o.e2e = e2eOptions{run: true, parallel: 3, timeout: time.Hour}
			o.volumes, o.volumesSet = false, true
		}, "--e2e: every suite is off"},
		{"e2e without ginkgo nodes", true, func(o *upOptions) { o.e2e = e2eOptions{run: true, timeout: time.Hour} }, "--e2e-parallel 0"},
		{"hybrid", true, func(o *upOptions) { o.hybridNodes, o.unownedNode = 2, true }, ""},
		{"hybrid with --kwok", false, func(o *upOptions) { o.hybridNodes = 1 }, "--hybrid-nodes set: a hybrid cluster needs real nodes"},
		{"hybrid with the CCM in the cluster", true, func(o *upOptions) { o.hybridNodes, o.ccm = 1, "in-cluster" }, "the CCM of a hybrid cluster runs as a process"},
		{"unowned node without hybrid", true, func(o *upOptions) { o.unownedNode = true }, "--hybrid-nodes 0: want at least 1 for a hybrid cluster"},
		{"hybrid bridge without hybrid", true, func(o *upOptions) { o.hybridBridge = "br9" }, "--hybrid-nodes 0"},
		{"hybrid range over the first cloud's", true, func(o *upOptions) { o.hybridNodes, o.hybridInstanceCIDR = 1, "10.88.9.0/24" }, "--hybrid-instance-cidr 10.88.9.0/24: overlaps --instance-cidr 10.88.0.0/16"},
		{"hybrid bad VIP pool", true, func(o *upOptions) { o.hybridNodes, o.hybridVIPPool = 1, "ten" }, "--hybrid-vip-pool"},
		{"volumes asked for with --kwok", false, func(o *upOptions) { o.volumes, o.volumesSet = true, true }, "--volumes true: kwok nodes run no pods, so they mount no volumes"},
		{"volumes asked for in a hybrid cluster", true, func(o *upOptions) { o.volumes, o.volumesSet, o.hybridNodes = true, true, 1 }, "--volumes true: the CSI driver serves one cloud's volumes"},
		{"several problems at once", false, func(o *upOptions) { o.nodes = -1; o.vipPool = "x" }, "--vip-pool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validOptions(t)
			if tt.real {
				o = validRealOptions(t)
			}
			tt.change(&o)
			_, err := o.config()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("config() = %v, want success", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("config() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestVolumesByDefault: the CSI driver is deployed by default where the cluster can
// serve volumes (real nodes of one cloud), and not elsewhere unless asked for.
func TestVolumesByDefault(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*upOptions)
		want   bool
	}{
		{"real nodes", func(o *upOptions) {}, true},
		{"real nodes, --volumes=false", func(o *upOptions) { o.volumes, o.volumesSet = false, true }, false},
		{"kwok", func(o *upOptions) { o.kwok, o.instanceCIDR, o.vipPool = true, "127.200.0.0/16", "127.100.0.0/16" }, false},
		{"hybrid", func(o *upOptions) { o.hybridNodes = 1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := validRealOptions(t)
			o.volumes = true // the flag's default
			tc.change(&o)
			cfg, err := o.config()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Volumes != tc.want {
				t.Errorf("Volumes = %v, want %v", cfg.Volumes, tc.want)
			}
		})
	}
}

func TestConfigDefaultDir(t *testing.T) {
	for kwok, want := range map[bool]string{false: realDir, true: kwokDir} {
		o := validOptions(t)
		o.kwok, o.dir = kwok, ""
		if !kwok {
			o = validRealOptions(t)
			o.dir = ""
		}
		cfg, err := o.config()
		if err != nil {
			t.Fatal(err)
		}
		if abs, _ := filepath.Abs(want); cfg.Dir != abs {
			t.Errorf("kwok %v: Dir = %q, want %q", kwok, cfg.Dir, abs)
		}
	}
}

func TestConfigOfFlags(t *testing.T) {
	o := validRealOptions(t)
	o.binDir, o.smoke = "relative-bin", true
	cfg, err := o.config()
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, "state"); cfg.Dir != want {
		t.Errorf("Dir = %q, want %q", cfg.Dir, want)
	}
	if want := filepath.Join(wd, "relative-bin"); cfg.BinDir != want {
		t.Errorf("BinDir = %q, want %q", cfg.BinDir, want)
	}
	if cfg.NodeMode != localcluster.NodesReal || cfg.BuildFrom != "" || !cfg.DeferCCM || len(cfg.CCMArgs) == 0 {
		t.Errorf("config of real nodes with --smoke and --build=false: %+v", cfg)
	}
	o = validOptions(t)
	o.build = true
	if cfg, err = o.config(); err != nil {
		t.Fatal(err)
	}
	if cfg.NodeMode != localcluster.NodesKwok || cfg.BuildFrom == "" || !filepath.IsAbs(cfg.BuildFrom) {
		t.Errorf("config of kwok nodes with --build: node mode %q, build from %q", cfg.NodeMode, cfg.BuildFrom)
	}
}

func TestUpFlags(t *testing.T) {
	root := newRootCommand()
	up, _, err := root.Find([]string{"up"})
	if err != nil || up.Name() != "up" {
		t.Fatalf("root command has no up subcommand: %v", err)
	}
	for flag, def := range map[string]string{
		"dir": "", "nodes": "3", "smoke": "false", "fresh": "false",
		"build": "true", "bin-dir": "", "vip-pool": "", "instance-cidr": "", "timeout": "3m0s",
		"kwok": "false", "cluster-cidr": "10.244.0.0/16", "bridge": "", "service-cidr": "10.96.0.0/16", "ccm": "process", "volumes": "true",
	} {
		f := up.Flags().Lookup(flag)
		if f == nil {
			t.Errorf("up has no --%s", flag)
			continue
		}
		if f.DefValue != def {
			t.Errorf("--%s defaults to %q, want %q", flag, f.DefValue, def)
		}
	}
	root.SetArgs([]string{"up", "--nodes", "0"})
	root.SetOut(new(strings.Builder))
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "--nodes 0") {
		t.Errorf("nephele up --nodes 0: %v, want it refused before anything starts", err)
	}
}
