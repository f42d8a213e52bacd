package kubenode

import (
	"strings"
)

// nodeChainPrefixes are the iptables chains of a node's components: kube-proxy's and
// kubelet's KUBE-*, the CNI portmap plugin's CNI-*.
var nodeChainPrefixes = []string{"KUBE-", "CNI-"}

// withoutNodeChains returns iptables-save output without the node's chains and every
// rule in or jumping to them, for iptables-restore: the rules of the host itself stay.
func withoutNodeChains(save string) string {
	isNode := func(chain string) bool {
		for _, p := range nodeChainPrefixes {
			if strings.HasPrefix(chain, p) {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(save, "\n") {
		fields := strings.Fields(line)
		drop := false
		switch {
		case len(fields) == 0:
		case strings.HasPrefix(fields[0], ":"):
			drop = isNode(strings.TrimPrefix(fields[0], ":"))
		case fields[0] == "-A" && len(fields) > 1:
			drop = isNode(fields[1])
			for i := 2; i+1 < len(fields) && !drop; i++ {
				if fields[i] == "-j" || fields[i] == "-g" || fields[i] == "--jump" || fields[i] == "--goto" {
					drop = isNode(fields[i+1])
				}
			}
		}
		if !drop {
			b.WriteString(line)
		}
	}
	return b.String()
}
