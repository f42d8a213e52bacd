// Package images builds nephele's container images without docker or a registry: from
// static Go binaries, with go-containerregistry, into OCI archives that a node's
// containerd imports (`ctr images import`) and that a registry client can push.
//
// Builds are reproducible: the layer's tar entries are sorted and carry fixed owners,
// modes and timestamps, the image config's creation time is the Unix epoch, the
// binaries are built with -trimpath and without build ID or VCS stamp, and the archive
// is written byte for byte the same way. Two builds of the same commit give the same
// image digest and the same archive bytes, so a digest names the code, not the moment or
// the machine it was built on.
//
// Every image is one layer on a minimal base (BaseFiles): the CA certificates, from the
// Go module golang.org/x/crypto/x509roots/fallback rather than the build machine, and an
// /etc/passwd and /etc/group naming root and the nonroot user (NonRootUser) the
// in-cluster programs run as. Nothing else: no shell, no libc, no package manager.
//
// Images are linux/amd64 unless BuildOptions.Platforms says otherwise (HostPlatform is
// this machine's, which images for its own nodes need, refused by name on an
// architecture nephele builds nothing for); with several
// platforms (linux/amd64 and linux/arm64 cross-compile cleanly, cgo off) an archive holds
// an OCI image index of one image per platform. Each image config names its platform
// (without which containerd's import does not match it) and carries the OCI labels
// org.opencontainers.image.source, .revision, .version and .title.
//
// The programs are InCluster: the sandbox image (cmd/pause, the containerd
// sandbox_image), the demo HTTP server (cmd/demo-http) and the cloud-controller-manager
// (cmd/cloud-controller-manager). Build compiles them, or any Go command of any module
// (a provider's own cloud-controller-manager); Spec, Image, Index, WriteArchive and
// WriteIndexArchive are the general pieces it is made of.
package images
