package kubenode

import (
	"encoding/json"
	"fmt"
	"net"
)

// BridgeName is the Linux bridge inside each host that connects its pods.
const BridgeName = "cni0"

// renderCNI renders the node's CNI network configuration for its pod CIDR, the range
// kube-controller-manager allocated to its Node: a bridge whose address is the range's
// gateway, host-local addresses from the range, and portmap for hostPort. As with kubenet,
// pods of other nodes are reached through routes to each node's range (nephele's route
// controller creates them in the cloud), so there is no overlay and no masquerading: a
// pod's packets keep its address and never leave the machine through it.
func renderCNI(n *Node, podCIDR string) ([]byte, error) {
	ip, ipnet, err := net.ParseCIDR(podCIDR)
	if err != nil || ip.To4() == nil {
		return nil, fmt.Errorf("pod CIDR %q of node %s is not an IPv4 CIDR", podCIDR, n.Config.NodeName)
	}
	if ones, _ := ipnet.Mask.Size(); ones > 30 {
		return nil, fmt.Errorf("pod CIDR %s of node %s is too small for pods", podCIDR, n.Config.NodeName)
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "nephele",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      BridgeName,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": ipnet.String()}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": n.Paths.CNIIPAM,
				},
			},
			map[string]any{
				"type":         "portmap",
				"capabilities": map[string]bool{"portMappings": true},
			},
		},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render CNI config: %w", err)
	}
	return append(data, '\n'), nil
}
