#!/usr/bin/env bash
# install-node-deps.sh: install the Debian packages a real nephele node needs and the
# project does not build itself (`make tools` builds kubelet, kube-proxy, containerd, its
# shim, ctr and the CNI plugins). Idempotent: it installs only what is missing and does
# nothing when everything is there. Not root: it prints the exact command to run and fails.
#
#   hack/install-node-deps.sh          install what is missing (as root)
#   hack/install-node-deps.sh --check  only report; exit 1 when something is missing
#   hack/install-node-deps.sh --e2e    also the programs of the e2e test images (with --check too)
#
# Each entry is "command package why". Only what is really run on a node is listed:
# - conntrack is not: kube-proxy 1.36 clears conntrack entries over netlink, not with the
#   conntrack tool (it only uses iptables' conntrack match, which is in the kernel). The
#   e2e images' list below has it for a test image.
# - socat is not: containerd 2.x forwards ports in Go (kubectl port-forward).
# - ethtool is not: the CNI bridge plugin sets hairpin mode over netlink.
set -euo pipefail

deps=(
	# containerd-shim-runc-v2 runs every container with runc; not built from Go modules.
	"runc runc the OCI runtime containerd's runc shim starts containers with"
	# kubelet (KUBE-FIREWALL, KUBE-KUBELET-CANARY), kube-proxy (iptables mode) and the
	# CNI portmap plugin call iptables, iptables-save and iptables-restore.
	"iptables iptables kube-proxy's iptables mode, kubelet's and the portmap plugin's chains"
	"iptables-restore iptables kube-proxy writes its rules with iptables-restore"
	"ip6tables iptables kubelet and kube-proxy probe the IPv6 family"
	# kubelet mounts tmpfs for secret, configmap and projected (token) volumes with mount(8).
	"mount mount kubelet mounts pod volumes with mount(8)"
	"umount mount kubelet unmounts pod volumes with umount(8)"
	# The local cloud enters a host's namespaces, and keeps its mount namespace, with these.
	"nsenter util-linux entering a host's network and mount namespaces"
	"unshare util-linux creating a host's persistent mount namespace"
	# The local cloud and the tests set up veths, bridges and routes with ip(8).
	"ip iproute2 host veths, bridges and routes"
	# nephele's CSI node plugin finds a volume's file system, checks it, formats a new
	# volume xfs or ext4 and grows it (k8s.io/mount-utils runs these).
	"blkid util-linux finding a volume's file system"
	"fsck util-linux checking a volume's file system before it is mounted"
	"mkfs.ext4 e2fsprogs formatting a new volume"
	"resize2fs e2fsprogs growing a volume's file system"
	"blockdev util-linux reading a volume's device size"
	"e2fsck e2fsprogs checking a volume's file system before growing it offline"
	"dumpe2fs e2fsprogs reading a volume's file system size"
	"mkfs.xfs xfsprogs formatting a new volume xfs, the driver's default"
	"xfs_growfs xfsprogs growing a mounted xfs volume"
)

# The e2e test images (images/e2eimages: agnhost, glibc-dns-testing, nginx, busybox) are
# made of these Debian programs with their shared libraries, as upstream's are made of
# Alpine's and Debian's packages; make e2e and make test (as root) install them. One
# "command=package" a line, unquoted: the list above is the nodes' alone.
e2e_deps=(
	nc.openbsd=netcat-openbsd # OpenBSD netcat: the tests run nc -v -t/-u -w in agnhost
	curl=curl
	wget=wget
	dig=bind9-dnsutils # dig, nslookup and host: the DNS tests' probers
	nslookup=bind9-dnsutils
	bash=bash
	getent=libc-bin
	hostname=hostname
	nginx=nginx-light # the nginx test image of the EndpointSlice conformance tests
	busybox=busybox-static
	conntrack=conntrack # the distroless-iptables test image (the CLOSE_WAIT test)
	bzip2=bzip2 # unpacking busybox's source (hack/build-busybox.sh)
)

check_only=false
with_e2e=false
for arg in "$@"; do
	case "$arg" in
	--check) check_only=true ;;
	--e2e) with_e2e=true ;;
	*)
		echo "usage: $0 [--check] [--e2e]" >&2
		exit 2
		;;
	esac
done
if $with_e2e; then
	for e in "${e2e_deps[@]}"; do
		deps+=("${e%%=*} ${e#*=} the e2e test images")
	done
fi

missing=()
for entry in "${deps[@]}"; do
	read -r cmd pkg why <<<"$entry"
	if ! PATH="$PATH:/usr/sbin:/sbin" command -v "$cmd" >/dev/null 2>&1; then
		echo "missing: $cmd (Debian package $pkg): $why" >&2
		case " ${missing[*]-} " in
		*" $pkg "*) ;;
		*) missing+=("$pkg") ;;
		esac
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if $check_only; then
	echo "node dependencies missing; install them with: $cmd" >&2
	exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "node dependencies missing and not root; run as root:" >&2
	echo "  $cmd" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"
