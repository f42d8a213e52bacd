package manager

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestParseClusterCIDRs: the one --cluster-cidr rule, upstream's: host bits accepted
// and masked, at most one CIDR per family; leading zeros refused on purpose.
func TestParseClusterCIDRs(t *testing.T) {
	tests := []struct {
		in      string
		want    []string // the networks; nil with wantErr
		wantErr string
	}{
		{in: ""},
		{in: "  "},
		{in: "10.244.0.0/16", want: []string{"10.244.0.0/16"}},
		{in: "10.244.0.1/16", want: []string{"10.244.0.0/16"}}, // host bits: upstream's ParseCIDRs returns the network
		{in: "10.244.3.4/16", want: []string{"10.244.0.0/16"}},
		{in: "fd00:10:244::/56", want: []string{"fd00:10:244::/56"}},
		{in: "fd00:10:244::1/56", want: []string{"fd00:10:244::/56"}},
		{in: "fd00:10:244::/56,10.244.0.0/16", want: []string{"fd00:10:244::/56", "10.244.0.0/16"}},
		{in: "10.244.1.7/16, fd00:10:244::/56", want: []string{"10.244.0.0/16", "fd00:10:244::/56"}},
		{in: "10.0.0.0/33", wantErr: `"10.0.0.0/33" is not a CIDR such as 10.244.0.0/16 or fd00:10:244::/56`},
		{in: "10.0.0.1", wantErr: `"10.0.0.1" is not a CIDR`},
		{in: "010.244.0.0/16", wantErr: `"010.244.0.0/16" is not a CIDR`},
		{in: "10.0.0.0/16,", wantErr: `"" is not a CIDR`},
		{in: "10.0.0.0/16,10.1.0.0/16", wantErr: "both CIDRs are IPv4: at most one IPv4 and one IPv6"},
		{in: "fd00::/48,fd01::/48", wantErr: "both CIDRs are IPv6: at most one IPv4 and one IPv6"},
		{in: "10.0.0.0/16,fd00::/48,10.1.0.0/16", wantErr: "3 CIDRs given: at most two, one IPv4 and one IPv6"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseClusterCIDRs(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseClusterCIDRs(%q) = %v, %v; want an error saying %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseClusterCIDRs(%q): %v", tt.in, err)
			}
			var want []netip.Prefix
			for _, w := range tt.want {
				want = append(want, netip.MustParsePrefix(w))
			}
			if !slices.Equal(got, want) {
				t.Errorf("ParseClusterCIDRs(%q) = %v, want %v", tt.in, got, want)
			}
		})
	}
}
