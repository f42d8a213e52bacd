package hosts

import (
	"net/netip"
	"strings"
	"testing"
)

func TestConfigRefusesBadRanges(t *testing.T) {
	p := netip.MustParsePrefix
	podsAndServices := []netip.Prefix{p("10.244.0.0/16"), p("10.96.0.0/16")}
	tests := []struct {
		name   string
		guards []netip.Prefix
		pool   netip.Prefix
		want   string // "" for accepted
	}{
		{"pod and service ranges", podsAndServices, netip.Prefix{}, ""},
		{"the range itself", []netip.Prefix{p("10.88.0.0/16")}, netip.Prefix{}, "overlaps the instance range"},
		{"inside the range", []netip.Prefix{p("10.88.5.0/24")}, netip.Prefix{}, "overlaps the instance range"},
		{"around the range", []netip.Prefix{p("10.0.0.0/8")}, netip.Prefix{}, "overlaps the instance range"},
		{"everything", []netip.Prefix{p("0.0.0.0/0")}, netip.Prefix{}, "whole IPv4 space"},
		{"IPv6", []netip.Prefix{p("fd00::/64")}, netip.Prefix{}, "want an IPv4 CIDR"},
		{"the default VIP pool", podsAndServices, DefaultVIPPool, ""},
		{"a /30 VIP pool", podsAndServices, p("10.89.0.4/30"), ""},
		{"a VIP pool on loopback", podsAndServices, p("127.100.0.0/16"), "outside 127.0.0.0/8"},
		{"a VIP pool too small", podsAndServices, p("10.89.0.0/31"), "at most a /30"},
		{"an IPv6 VIP pool", podsAndServices, p("fd00::/64"), "IPv4"},
		{"a VIP pool inside the instance range", podsAndServices, p("10.88.7.0/24"), "overlaps 10.88.0.0/16"},
		{"a VIP pool over a guard", podsAndServices, p("10.244.0.0/16"), "overlaps 10.244.0.0/16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Dir: t.TempDir(), Range: p("10.88.0.0/16"), Guards: tt.guards, VIPPool: tt.pool}
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
