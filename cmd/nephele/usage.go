package main

import (
	"fmt"
	"io"
	"path/filepath"
)

// printUsage tells a person how to use the cluster that is up.
func (c *cluster) printUsage(out io.Writer) {
	fmt.Fprintf(out, `
nephele is up: %d nodes, kube-apiserver %s, local cloud %s

Use it with kubectl:
  export KUBECONFIG=%s
  kubectl get nodes -L topology.kubernetes.io/zone,node.kubernetes.io/instance-type
  kubectl create service loadbalancer hello --tcp=%d:%d
  kubectl get service hello                # EXTERNAL-IP comes from the local cloud
  curl http://<EXTERNAL-IP>:%d/          # answered by a node agent, through the cloud's load balancer

Without kubectl:
  curl --cacert %s -H "Authorization: Bearer $(cat %s)" %s/api/v1/nodes
  curl -H "Authorization: Bearer $(cat %s)" %s/v1/instances
  curl -H "Authorization: Bearer $(cat %s)" %s/v1/loadbalancers

Logs: %s
Press Ctrl-C to stop.
`,
		len(c.nodes), c.env.APIServerURL, c.cloudURL,
		c.kubeconfigPath(),
		smokeTCPPort, smokeTCPPort, smokeTCPPort,
		c.env.CAFile(), c.tokenPath(), c.env.APIServerURL,
		c.cloudTokenPath(), c.cloudURL,
		c.cloudTokenPath(), c.cloudURL,
		filepath.Join(c.runDir(), "*.log"),
	)
}
