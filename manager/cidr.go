package manager

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseClusterCIDRs parses --cluster-cidr, the one parser of it: the manager's flags,
// deploy/render (so `nephele manifests` and the operator) and, through
// ControllerConfig.ClusterCIDRs, the route controller all read it here, so a value one
// accepts the others accept too.
//
// The rule is upstream's cloud-controller-manager's (k8s.io/cloud-provider app/core.go,
// processCIDRs with k8s.io/utils/net.ParseCIDRs): empty means none; otherwise one CIDR,
// or two separated by a comma, one IPv4 and one IPv6. An address with host bits set
// (10.244.0.1/16) is accepted and means its network (10.244.0.0/16), as upstream's parser
// returns the network; the networks are returned masked. Spaces around each CIDR are
// ignored. One deliberate difference: upstream's "sloppy" parser also reads IPv4
// addresses with leading zeros (010.244.0.0/16), which some tools read as octal;
// nephele refuses them, as the CloudControllerManager CRD's isCIDR rule and Go's
// parsers do, rather than guess.
func ParseClusterCIDRs(s string) ([]netip.Prefix, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		return nil, fmt.Errorf("%d CIDRs given: at most two, one IPv4 and one IPv6", len(parts))
	}
	out := make([]netip.Prefix, 0, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		prefix, err := netip.ParsePrefix(p)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR such as 10.244.0.0/16 or fd00:10:244::/56", p)
		}
		if len(out) == 1 && out[0].Addr().Is4() == prefix.Addr().Is4() {
			return nil, fmt.Errorf("both CIDRs are %s: at most one IPv4 and one IPv6", family(prefix.Addr().Is4()))
		}
		out = append(out, prefix.Masked())
	}
	return out, nil
}

func family(v4 bool) string {
	if v4 {
		return "IPv4"
	}
	return "IPv6"
}
