package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/localcloud/hosts"
	"github.com/nephele-dev/nephele/localcluster"
)

func validOptions(t *testing.T) upOptions {
	t.Helper()
	return upOptions{
		dir: "state", binDir: t.TempDir(), nodes: 3, build: true, kwok: true,
		vipPool: "127.100.0.0/16", instanceCIDR: "127.200.0.0/16", clusterCIDR: "10.244.0.0/16", timeout: time.Minute,
	}
}

// validRealOptions are the flags of a run on real nodes with the defaults.
func validRealOptions(t *testing.T) upOptions {
	t.Helper()
	o := validOptions(t)
	o.kwok, o.instanceCIDR = false, ""
	return o
}

func TestCompleteChecksFlags(t *testing.T) {
	tests := []struct {
		name   string
		change func(*upOptions)
		want   string // part of the error; empty for success
	}{
		{"defaults", func(*upOptions) {}, ""},
		{"no nodes", func(o *upOptions) { o.nodes = 0 }, "--nodes 0"},
		{"too many nodes", func(o *upOptions) { o.nodes = maxKwokNodes + 1 }, "want 1 to 100"},
		{"empty dir", func(o *upOptions) { o.dir = "" }, "--dir"},
		{"zero timeout", func(o *upOptions) { o.timeout = 0 }, "--timeout"},
		{"bad VIP pool", func(o *upOptions) { o.vipPool = "127.100.0.0" }, "--vip-pool"},
		{"VIP pool outside loopback", func(o *upOptions) { o.vipPool = "10.0.0.0/24" }, "inside 127.0.0.0/8"},
		{"IPv6 instance range", func(o *upOptions) { o.instanceCIDR = "::1/128" }, "--instance-cidr"},
		{"instance range too small", func(o *upOptions) { o.instanceCIDR = "127.200.0.0/30"; o.nodes = 3 }, "fewer addresses than --nodes 3"},
		{"instance range just big enough", func(o *upOptions) { o.instanceCIDR = "127.200.0.0/29"; o.nodes = 6 }, ""},
		{"several problems at once", func(o *upOptions) { o.nodes = -1; o.vipPool = "x" }, "--vip-pool"},
		{"bad cluster CIDR", func(o *upOptions) { o.clusterCIDR = "10.244.0.0" }, "--cluster-cidr"},
		{"bridge with --kwok", func(o *upOptions) { o.bridge = "br0" }, "--bridge and --service-cidr are for real nodes"},
		{"service CIDR with --kwok", func(o *upOptions) { o.serviceCIDR = "10.97.0.0/16" }, "--bridge and --service-cidr are for real nodes"},
		{"in-cluster CCM with --kwok", func(o *upOptions) { o.ccm = "in-cluster" }, "--ccm in-cluster is for real nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validOptions(t)
			tt.change(&o)
			err := o.complete()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("complete() = %v, want success", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("complete() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestCompleteChecksRealFlags(t *testing.T) {
	tests := []struct {
		name   string
		change func(*upOptions)
		want   string // part of the error; empty for success
	}{
		{"defaults", func(*upOptions) {}, ""},
		{"too many real nodes", func(o *upOptions) { o.nodes = localcluster.MaxNodes + 1 }, "want 1 to 20"},
		{"loopback instance range", func(o *upOptions) { o.instanceCIDR = "127.200.0.0/16" }, "outside 127.0.0.0/8"},
		{"instance range too small", func(o *upOptions) { o.instanceCIDR = "10.88.0.0/31" }, "at most a /30"},
		{"bad bridge", func(o *upOptions) { o.bridge = "a-bridge-name-too-long" }, "--bridge"},
		{"bad service CIDR", func(o *upOptions) { o.serviceCIDR = "ten" }, "--service-cidr"},
		{"in-cluster CCM", func(o *upOptions) { o.ccm = "in-cluster" }, ""},
		{"operator CCM", func(o *upOptions) { o.ccm = "operator" }, ""},
		{"unknown CCM mode", func(o *upOptions) { o.ccm = "sidecar" }, `--ccm "sidecar": want process, in-cluster or operator`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validRealOptions(t)
			tt.change(&o)
			err := o.complete()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("complete() = %v, want success", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("complete() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	o := validRealOptions(t)
	if err := o.complete(); err != nil {
		t.Fatal(err)
	}
	if o.instanceCIDR != realInstanceCIDR || o.bridge != hosts.DefaultBridge || o.serviceCIDR != controlplane.DefaultServiceCIDR.String() {
		t.Errorf("real defaults: instance range %s, bridge %s, service CIDR %s", o.instanceCIDR, o.bridge, o.serviceCIDR)
	}
}

func TestCompleteMakesPathsAbsolute(t *testing.T) {
	o := validOptions(t)
	o.binDir = "relative-bin"
	if err := o.complete(); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, "state"); o.dir != want {
		t.Errorf("dir = %q, want %q", o.dir, want)
	}
	if want := filepath.Join(wd, "relative-bin"); o.binDir != want {
		t.Errorf("binDir = %q, want %q", o.binDir, want)
	}
}

func TestUpFlags(t *testing.T) {
	root := newRootCommand()
	up, _, err := root.Find([]string{"up"})
	if err != nil || up.Name() != "up" {
		t.Fatalf("root command has no up subcommand: %v", err)
	}
	for flag, def := range map[string]string{
		"dir": filepath.Join(".nephele", "up"), "nodes": "3", "smoke": "false", "fresh": "false",
		"build": "true", "bin-dir": "", "vip-pool": "127.100.0.0/16", "instance-cidr": "", "timeout": "3m0s",
		"kwok": "false", "cluster-cidr": "10.244.0.0/16", "bridge": "", "service-cidr": "", "ccm": "process",
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
