package kubenode

import (
	"fmt"
	"strings"
)

// renderResolvConf renders the resolv.conf kubelet gives pods whose DNS policy is
// Default, and the base of the others. Without cluster DNS servers it names the pod's own
// loopback, where nothing answers: a lookup fails at once inside the pod instead of
// asking a server outside the machine.
func renderResolvConf(n *Node) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# resolv.conf for the pods of node %s, written by nephele's node runtime.\n", n.Config.NodeName)
	servers := n.Config.ClusterDNS
	if len(servers) == 0 {
		b.WriteString("# No cluster DNS: nothing outside the machine is asked.\n")
		servers = []string{"127.0.0.1"}
	}
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	b.WriteString("options ndots:1 timeout:1 attempts:1\n")
	return []byte(b.String())
}
