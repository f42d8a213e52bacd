// Package hosts turns local cloud instances into real Linux hosts on the machine the cloud
// runs on: each host is a network namespace with a veth on a bridge of the cloud's own,
// persistent mount and UTS namespaces, a PID namespace made at each boot (the boot process is
// its PID 1, the host's init), a cgroup in every hierarchy, private bind mounts
// over the paths its software would otherwise share with the other hosts, its own state
// directory (its "disk"), and a boot command the cloud starts inside it and supervises.
//
// A Machine owns every change it makes to the machine and records each one in a journal
// file before making it, so a cloud killed with SIGKILL is re-adopted or cleaned up by the
// next Open of the same directory, and Cleanup undoes whatever a directory recorded. Close
// stops every host and removes everything but the hosts' state directories and the
// journal; the next Open boots them again. Release leaves everything running and
// recorded, as a killed cloud would, for the next Open to adopt.
//
// Nothing leaves the machine: the bridge is connected to nothing else, unreachable
// routes on the machine cover the instance range and the guard CIDRs (a cluster's pod and
// Service ranges), and a chain of the cloud's own in iptables' FORWARD chain rejects
// anything forwarded between the bridge and any other interface. There is no masquerade,
// and ip_forward is left as it is: hosts reach each other and the machine over the
// bridge's layer 2.
//
// Routes (SetRoutes) work like a VPC route table: a destination CIDR is sent to a host's
// address, on the machine and inside every host's network namespace.
//
// Load balancers (SetLoadBalancers, with Config.VIPPool) are routed to the hosts by the
// machine's kernel, as MetalLB and kube-vip do: each new connection to a VIP goes,
// unchanged, to one of its healthy hosts, chosen per connection (mangle marks, CONNMARK,
// a policy route per host), and anything else for the pool is refused on the machine;
// vip.go says how.
//
// The package needs root, ip(8) from iproute2, nsenter(1), unshare(1) and mount(8) from
// util-linux, env(1) from coreutils 8.31 or later (--default-signal), and iptables(8)
// with iptables-restore(8) (and, for load balancers, the mangle, nat and filter tables and
// the conntrack, connmark, mark, recent and statistic matches). It knows nothing about
// Kubernetes; the local cloud's server maps instances onto it.
package hosts
