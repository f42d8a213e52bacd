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
//     the image's name and never ask what is in it. Upstream's image also has iperf, a
//     CoreDNS binary at /coredns and a fake registry tree, which only tests outside the
//     chosen set use; they are left out.
//   - glibc-dns-testing:2.0.0 — upstream's is Debian with dnsutils: a shell, dig and
//     glibc's getent, for the DNS tests' second prober. The same programs from this
//     Debian machine.
//   - nginx:1.15-4 — a real nginx, Debian's nginx-light (1.22 on bookworm, not 1.15),
//     with its libraries, serving a page on port 80 as upstream's image does. The
//     EndpointSlice and Endpoints conformance tests that use it only need its pods to run.
//   - busybox:1.37.0-1 — Debian's busybox-static (1.35) with a link per applet, but
//     /bin/sh is Debian's bash: busybox 1.35's ash drops environment variables whose
//     names are not identifiers (a ConfigMap key "data-1" through envFrom), which
//     upstream's busybox (1.36 and later) keeps.
//   - pause:3.10.2 — nephele's own pause image (cmd/pause), pushed under upstream's name.
//
// Debian's programs make these images as reproducible as the machine's package
// versions: the same packages give the same bytes. hack/install-node-deps.sh --e2e
// installs the packages.
package e2eimages
