// Package localcluster brings up a real Kubernetes cluster on the local cloud's host
// instances, on one machine, the way kind or minikube would, but with a cloud API whose
// instances, load balancers and routes nephele's cloud-controller-manager really drives.
// It is the only way nephele starts a cluster: `nephele up` runs it, the real-node tests
// run it, and so can any test that needs real kubelets, pods and a cloud. The smoke
// checks of `nephele up --smoke` are package smoke beside it.
//
// Its nodes are real (Config.NodeMode NodesReal, the default) or simulated by kwok
// (NodesKwok): Node objects kwok keeps Ready, backed by local cloud instances on loopback
// addresses where a node agent answers on the Services' node ports in place of
// kube-proxy. Kwok nodes need no root and run no pods; everything else, the
// cloud-controller-manager above all, runs the same way in both modes, with leader
// election, as in production.
//
// Start takes these steps for real nodes, each reported to Config.Progress with its time
// (kwok nodes skip the bridge, the registry and the hosts: step 4 registers the Nodes
// and starts kwok and the node agent instead):
//
//  1. clean up whatever a previous run in Config.Dir left on the machine (a run killed
//     with SIGKILL leaves its hosts running: hosts.Cleanup removes them from the journal
//     the local cloud kept in Dir/hosts), and with Config.BuildFrom build nephele's
//     commands and images into BinDir;
//  2. start the local cloud with --hosts: a bridge (Config.Bridge) on the instance range,
//     with Config.ClusterCIDR and Config.ServiceCIDR as guard CIDRs, so that nothing a
//     host or a pod sends to those ranges can leave the machine;
//  3. start etcd and kube-apiserver listening on the bridge's address, which hosts and
//     pods reach (controlplane.Options.Address): Node,RBAC authorization, NodeRestriction,
//     client certificates, --kubelet-preferred-address-types=InternalIP,Hostname; then
//     kube-controller-manager (--cloud-provider=external --allocate-node-cidrs
//     --cluster-cidr) and kube-scheduler;
//  4. create Config.Nodes host instances in the cloud, each booting `nephele node boot`
//     (package kubenode: containerd, kubelet --cloud-provider=external with a client
//     certificate CN=system:node:<name>, O=system:nodes, the CNI for the pod CIDR
//     kube-controller-manager assigned, kube-proxy) with the pause and demo-http image
//     archives, and wait until every Node is registered and Ready;
//  5. start nephele's cloud-controller-manager (the local provider,
//     --configure-cloud-routes --cluster-cidr) and wait until it has initialized every
//     node (Config.DeferCCM leaves this to StartCCM);
//  6. for real nodes, deploy cluster DNS (CoreDNS in kube-system, the Service kube-dns at
//     ClusterDNSAddress, which every kubelet names as clusterDNS) and wait until it is
//     Ready: pods schedule only on initialized nodes, and tools such as upstream's e2e
//     suite expect every kube-system pod Ready. Its Corefile answers names outside the
//     cluster itself, so no lookup leaves the machine.
//
// The cloud starts before the control plane because the apiserver listens on the bridge
// the cloud creates.
//
// Pods reach pods of other nodes only through the routes nephele's route controller
// creates in the cloud: the cloud programs each route on the machine and in every host,
// as a VPC route table does, and the guard CIDRs make a missing route fail at once.
//
// Stop undoes it all, in the order that leaves the machine as it was: the
// cloud-controller-manager, kube-controller-manager and kube-scheduler first (so nothing
// recreates pods), then every pod is deleted through the API (so kubelet tears down its
// containers and the CNI its addresses), then the nodes are stopped through the cloud
// (the node runtime removes its containers, mounts, cgroups and iptables chains), then
// the control plane, then the cloud (bridge, routes, chains), and finally the hosts'
// directories; each node's logs are kept in Dir/nodes/<name>/.
//
// Everything a run changes on the machine is recorded before it is made (the local
// cloud's journal), so a run that was killed is cleaned up by the next Start in the same
// directory, or by Cleanup. Preflight says, before anything changes, what this machine
// lacks for real nodes (Linux, root, capabilities, programs, Debian packages, binaries)
// and how to get it. The caller holds the directory: one cluster per Dir at a time.
//
//	c, err := localcluster.Start(ctx, localcluster.Config{Dir: dir, BinDir: bin, Nodes: 2})
//	if err != nil {
//		return err
//	}
//	defer c.Stop(context.WithoutCancel(ctx))
//	nodes, err := c.Env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
package localcluster
