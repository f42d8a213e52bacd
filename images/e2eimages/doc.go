// Package e2eimages builds the container images upstream Kubernetes' end-to-end suite
// (k8s.io/kubernetes/test/e2e v1.36.3) runs, from what is on this machine, and names
// them where the suite looks for them: nothing comes from registry.k8s.io or Docker Hub,
// which this machine cannot reach and nephele's clusters must not ask.
//
// The suite builds every image reference from a registry prefix per image family
// (test/utils/image/manifest.go); KUBE_TEST_REPO_LIST, a YAML file (RepoList), points
// each family under images.Registry, the registry host every node's containerd pulls
// from the cluster's own registry. Each image keeps the name and version the suite asks
// for (Ref): <prefix>/<name>:<version>.
//
// What each image holds, and from where:
//
//   - agnhost:2.63.0 — the agnhost binary built from k8s.io/kubernetes/test/images/agnhost
//     (hack/tools/e2e pins the module) at /agnhost (ENTRYPOINT, CMD pause, as upstream),
//     and what upstream's Alpine-based image carries that the tests run through
//     `/bin/sh -c`: a shell, OpenBSD netcat, curl, wget, dig, nslookup and host (BIND),
//     getent, iproute2's ip and ss, and the coreutils, grep and sed the scripts use. They
//     are Debian's programs from this machine with their shared-library closure
//     (images.HostPrograms), not busybox: busybox's nc lacks the OpenBSD flags the tests
//     pass and its static wget crashed here. porter's TLS key pair (/localhost.crt,
//     /localhost.key) is made at build for 127.0.0.1, ::1 and localhost, as upstream's
//     is: the Conformance proxy test reaches porter's TLS ports through the apiserver.
//     Every other applet of the machine's busybox-static is linked in /bin, as Alpine's
//     busybox provides them upstream (dd, od, md5sum...; the Debian programs come first
//     in PATH). The same image is pushed as agnhost:2.55 too (AgnhostPrev), the tag
//     the StatefulSet, Deployment and kubectl tests roll from and back to: they change
//     the image's name and never ask what is in it. nephele's CoreDNS (bin/coredns, the cluster
//     DNS's) is at /coredns, where upstream's image has one: the DNS tests run it as a
//     pod's name server. Upstream's image also has iperf and a fake registry tree, which
//     only tests outside the chosen set use; they are left out.
//   - glibc-dns-testing:2.0.0 — upstream's is Debian with dnsutils: a shell, dig and
//     glibc's getent, for the DNS tests' second prober. The same programs from this
//     Debian machine.
//   - nginx:1.15-4 — a real nginx, Debian's nginx-light (1.22 on bookworm, not 1.15),
//     with its libraries, serving a page on port 80 as upstream's image does. The
//     EndpointSlice and Endpoints conformance tests that use it only need its pods to run.
//   - busybox:1.37.0-1 — upstream busybox built static by hack/build-busybox.sh (the
//     upstream tarball of this Debian release's source package, 1.35 on bookworm,
//     defconfig, no Debian patch), with a link per applet and ash as /bin/sh, as
//     upstream's image. Not Debian's busybox-static: Debian patches ash to drop
//     environment variables whose names are not identifiers (a ConfigMap key "data-1"
//     through envFrom), which upstream's keeps; bash keeps them too but words its
//     errors otherwise than ash, and a Conformance test compares ash's word for word.
//   - kitten:1.8 and nautilus:1.8 — the agnhost program with upstream's picture and
//     data.json (test/images/<name>/html of the k8s.io/kubernetes module, copied by make
//     e2e-bins) at /, running test-webserver, as upstream's: kubectl's Update Demo reads
//     data.json through the pod proxy.
//   - nonewprivs:1.4 — upstream's nnp program (test/images/nonewprivs, built by make
//     e2e-bins) at /usr/local/bin/nnp, setuid root, as the command: it prints its
//     effective uid, which allowPrivilegeEscalation decides.
//   - regression-issue-74839:1.4 — upstream's boom-server (test/images/regression-issue-74839,
//     built by make e2e-bins) as the entrypoint, for the invalid conntrack state test.
//   - distroless-iptables:v0.9.6 — Debian's iptables (nft) and conntrack with dash,
//     coreutils and busybox's other applets: the CLOSE_WAIT test runs it privileged on
//     the host network and reads conntrack's table through /bin/sh.
//   - sample-apiserver:1.29.2 — k8s.io/sample-apiserver v0.36.3 (the suite's own module
//     graph; upstream's tag names the 1.29 build) as the entrypoint, and etcd:3.6.8-0 —
//     the etcd the control plane runs at /usr/local/bin/etcd: the aggregator's test runs
//     both in one pod and registers the wardle API through the aggregation layer.
//   - pause:3.10.2 — nephele's own pause image (cmd/pause), pushed under upstream's name.
//
// Debian's programs make these images as reproducible as the machine's package
// versions: the same packages give the same bytes. hack/install-node-deps.sh --e2e
// installs the packages.
package e2eimages
