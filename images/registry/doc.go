// Package registry serves container images to a cluster's nodes from this machine, so
// that their containerd pulls images as it would in any real cluster, and pushes
// nephele's image archives (package images) into it.
//
// The server is go-containerregistry's registry (pkg/registry), an implementation of the
// OCI distribution API: nephele already builds its images with go-containerregistry, the
// handler is a few hundred lines with no configuration, and its blobs can live on disk.
// The CNCF distribution registry would bring storage drivers, notification sinks,
// OpenTelemetry and a configuration format that a cluster on one machine does not use.
// Manifests and tags live in the server's memory, blobs in Options.Dir: a registry lives
// as long as the cluster whose images it serves, which pushes them at every start.
//
// It speaks plain HTTP. It listens only on an address given to it (a local cloud
// bridge's, which the nodes reach and nothing outside the machine does), and nodes are
// told with a containerd hosts.toml to use it by plain HTTP for nephele's registry
// name (images.Registry), which resolves nowhere else.
package registry
