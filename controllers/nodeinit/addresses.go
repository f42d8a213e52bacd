package nodeinit

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// AnnotationProvidedNodeIP is set by a kubelet started with --node-ip and
// --cloud-provider=external: the address (or dual-stack pair) the node must be known by.
const AnnotationProvidedNodeIP = "alpha.kubernetes.io/provided-node-ip"

// parseProvidedNodeIP parses the provided-node-ip annotation: one IP, or an IPv4 and an
// IPv6 address separated by a comma, as the kubelet writes it.
func parseProvidedNodeIP(s string) ([]netip.Addr, error) {
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		return nil, fmt.Errorf("annotation %s=%q: want one IP or a dual-stack pair of IPs", AnnotationProvidedNodeIP, s)
	}
	ips := make([]netip.Addr, 0, len(parts))
	for _, p := range parts {
		ip, err := netip.ParseAddr(p)
		if err != nil {
			return nil, fmt.Errorf("annotation %s=%q: %q is not an IP address", AnnotationProvidedNodeIP, s, p)
		}
		ips = append(ips, ip.Unmap())
	}
	if len(ips) == 2 {
		if ips[0].Is4() == ips[1].Is4() {
			return nil, fmt.Errorf("annotation %s=%q: two IPs must be one IPv4 and one IPv6 address", AnnotationProvidedNodeIP, s)
		}
		if ips[0].IsUnspecified() || ips[1].IsUnspecified() {
			return nil, fmt.Errorf("annotation %s=%q: a dual-stack pair cannot include an unspecified address (0.0.0.0 or ::)", AnnotationProvidedNodeIP, s)
		}
	}
	return ips, nil
}

// sameIP reports whether the address string a is the IP ip.
func sameIP(a string, ip netip.Addr) bool {
	parsed, err := netip.ParseAddr(a)
	return err == nil && parsed.Unmap() == ip
}

// filterByNodeIPs orders and filters the cloud's addresses the way upstream does for a
// node with provided IPs: every address equal to a provided IP comes first, and becomes
// the only address of its type; addresses of other types follow in the cloud's order.
// A provided IP the cloud does not report is an error naming it: the node must not be
// initialized with addresses its kubelet does not use.
func filterByNodeIPs(ips []netip.Addr, cloudAddrs []corev1.NodeAddress) ([]corev1.NodeAddress, error) {
	out := make([]corev1.NodeAddress, 0, len(cloudAddrs))
	var enforced []corev1.NodeAddressType
	for _, ip := range ips {
		matched := false
		for _, a := range cloudAddrs {
			if sameIP(a.Address, ip) {
				out = append(out, a)
				enforced = append(enforced, a.Type)
				matched = true
			}
		}
		if !matched {
			return nil, &missingNodeIPError{ip: ip, cloud: cloudAddrs}
		}
	}
	for _, a := range cloudAddrs {
		if !slices.Contains(enforced, a.Type) {
			out = append(out, a)
		}
	}
	return out, nil
}

// missingNodeIPError says the cloud does not know a provided node IP.
type missingNodeIPError struct {
	ip    netip.Addr
	cloud []corev1.NodeAddress
}

func (e *missingNodeIPError) Error() string {
	return fmt.Sprintf("the provided node IP %s (annotation %s) is not among the instance's addresses in the cloud %s",
		e.ip, AnnotationProvidedNodeIP, formatAddresses(e.cloud))
}

// desiredAddresses returns the addresses node should have given the cloud's answer. Like
// upstream, a node keeps the Hostname address its kubelet reported when the cloud has
// none, and the provided-node-ip annotation selects among the cloud's addresses. When
// nothing needs to change it returns cloudAddrs itself, without allocating.
func desiredAddresses(node *corev1.Node, cloudAddrs []corev1.NodeAddress) ([]corev1.NodeAddress, error) {
	addrs := cloudAddrs
	if !hasType(cloudAddrs, corev1.NodeHostName) {
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeHostName {
				if len(addrs) == len(cloudAddrs) {
					// Copy first: cloudAddrs may be shared with the inventory.
					addrs = append(make([]corev1.NodeAddress, 0, len(cloudAddrs)+1), cloudAddrs...)
				}
				addrs = append(addrs, a)
			}
		}
	}
	provided, ok := node.Annotations[AnnotationProvidedNodeIP]
	if !ok {
		return addrs, nil
	}
	ips, err := parseProvidedNodeIP(provided)
	if err != nil {
		return nil, err
	}
	return filterByNodeIPs(ips, addrs)
}

// droppedTypes returns the address types current has and next lacks. A cloud answer that
// loses a whole type (no InternalIP any more) is far more often a broken answer than a
// real change, and writing it would cut the node off, so the refresh refuses it.
func droppedTypes(current, next []corev1.NodeAddress) []corev1.NodeAddressType {
	var dropped []corev1.NodeAddressType
	for _, a := range current {
		if !hasType(next, a.Type) && !slices.Contains(dropped, a.Type) {
			dropped = append(dropped, a.Type)
		}
	}
	return dropped
}

func hasType(addrs []corev1.NodeAddress, t corev1.NodeAddressType) bool {
	for _, a := range addrs {
		if a.Type == t {
			return true
		}
	}
	return false
}

func formatAddresses(addrs []corev1.NodeAddress) string {
	parts := make([]string, len(addrs))
	for i, a := range addrs {
		parts[i] = string(a.Type) + "=" + a.Address
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
