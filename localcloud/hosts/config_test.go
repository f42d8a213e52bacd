package hosts

import (
	"net/netip"
	"strings"
	"testing"
)

func TestConfigRefusesBadGuards(t *testing.T) {
	p := netip.MustParsePrefix
	tests := []struct {
		name   string
		guards []netip.Prefix
		want   string // "" for accepted
	}{
		{"pod and service ranges", []netip.Prefix{p("10.244.0.0/16"), p("10.96.0.0/16")}, ""},
		{"the range itself", []netip.Prefix{p("10.88.0.0/16")}, "overlaps the instance range"},
		{"inside the range", []netip.Prefix{p("10.88.5.0/24")}, "overlaps the instance range"},
		{"around the range", []netip.Prefix{p("10.0.0.0/8")}, "overlaps the instance range"},
		{"everything", []netip.Prefix{p("0.0.0.0/0")}, "whole IPv4 space"},
		{"IPv6", []netip.Prefix{p("fd00::/64")}, "want an IPv4 CIDR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Dir: t.TempDir(), Range: p("10.88.0.0/16"), Guards: tt.guards}
			err := c.complete()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("complete: %v, want it accepted", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("complete: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestConfigRefusesBadVIPPools(t *testing.T) {
	p := netip.MustParsePrefix
	tests := []struct {
		name string
		pool netip.Prefix
		want string // "" for accepted
	}{
		{"none", netip.Prefix{}, ""},
		{"the default", DefaultVIPPool, ""},
		{"a /30", p("10.89.0.4/30"), ""},
		{"loopback", p("127.100.0.0/16"), "outside 127.0.0.0/8"},
		{"too small", p("10.89.0.0/31"), "at most a /30"},
		{"IPv6", p("fd00::/64"), "IPv4"},
		{"inside the instance range", p("10.88.7.0/24"), "overlaps 10.88.0.0/16"},
		{"a guard", p("10.244.0.0/16"), "overlaps 10.244.0.0/16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Dir: t.TempDir(), Range: p("10.88.0.0/16"), Guards: []netip.Prefix{p("10.244.0.0/16")}, VIPPool: tt.pool}
			err := c.complete()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("complete: %v, want it accepted", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("complete: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}
