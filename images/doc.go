// Package images builds nephele's container images without docker or a registry: from
// static Go binaries, with go-containerregistry, into OCI archives that a node's
// containerd imports (`ctr images import`).
//
// Builds are reproducible: the layer's tar entries are sorted and carry fixed owners,
// modes and timestamps, the image config's creation time is the Unix epoch, and the
// archive is written byte for byte the same way. Two builds of the same binaries give the
// same image digest and the same archive bytes, so a digest names the code, not the
// moment it was built.
//
// Every image is linux/amd64 (set in the config, without which containerd's import does
// not match the platform) and carries the OCI labels org.opencontainers.image.source,
// .revision and .version.
//
// The images nephele's real nodes need are built by Build from this module's commands:
// the sandbox image (cmd/pause, the containerd sandbox_image) and the demo HTTP server
// (cmd/demo-http). Spec, Image and WriteArchive are the general pieces they are made of.
package images
