package images

import (
	"fmt"
	"path/filepath"
)

// Prebuilt is an image of one static program built outside nephele's module, by a tool
// module of hack/tools (make tools), such as CoreDNS: Build cannot compile it from
// nephele's tree, so BuildPrebuilt packs the binary it finds.
type Prebuilt struct {
	// Program names the image (Name), the binary's path in it (/Name) and its settings.
	Program
	// Version is the tag: the upstream version the binary is built from.
	Version string
	// Args are the entrypoint's default arguments.
	Args []string
}

// CoreDNSVersion is the CoreDNS version hack/tools/coredns pins
// (TestCoreDNSVersionIsPinned keeps the two equal).
const CoreDNSVersion = "v1.15.0"

// CoreDNS is the cluster DNS server of nephele's clusters, built by make tools from
// github.com/coredns/coredns (hack/tools/coredns) into bin/coredns. It runs as the
// nonroot user: its pods lower net.ipv4.ip_unprivileged_port_start, a namespaced sysctl,
// to serve port 53 without a capability.
var CoreDNS = Prebuilt{
	Program: Program{Name: "coredns", Title: "CoreDNS " + CoreDNSVersion + " (nephele's cluster DNS)",
		User: NonRootUser, Ports: []string{"53/udp", "53/tcp", "9153/tcp"}},
	Version: CoreDNSVersion,
}

// The CSI sidecars' versions, as hack/tools/csi pins them (TestVersionsArePinned keeps
// them equal).
const (
	CSIProvisionerVersion = "v6.4.0"
	CSIAttacherVersion    = "v4.13.0"
	CSIResizerVersion     = "v2.3.0"
)

// The CSI sidecars nephele's CSI driver runs beside in its controller Deployment, the
// real ones from the Kubernetes CSI project, built by make csi-bins (hack/tools/csi) into
// bin/. They run as the nonroot user: they only talk to the driver's socket, on a volume
// the pod shares, and to the API server.
var (
	CSIProvisioner = Prebuilt{Program: Program{Name: "csi-provisioner",
		Title: "external-provisioner " + CSIProvisionerVersion + " (the Kubernetes CSI sidecar)", User: NonRootUser},
		Version: CSIProvisionerVersion}
	CSIAttacher = Prebuilt{Program: Program{Name: "csi-attacher",
		Title: "external-attacher " + CSIAttacherVersion + " (the Kubernetes CSI sidecar)", User: NonRootUser},
		Version: CSIAttacherVersion}
	CSIResizer = Prebuilt{Program: Program{Name: "csi-resizer",
		Title: "external-resizer " + CSIResizerVersion + " (the Kubernetes CSI sidecar)", User: NonRootUser},
		Version: CSIResizerVersion}
)

// CSISidecars are the CSI sidecar images.
var CSISidecars = []Prebuilt{CSIProvisioner, CSIAttacher, CSIResizer}

// Prebuilts are the prebuilt images a real cluster's registry serves besides
// InCluster's: CoreDNS and the CSI sidecars.
var Prebuilts = append([]Prebuilt{CoreDNS}, CSISidecars...)

// Ref is p's reference under Registry at its Version.
func (p Prebuilt) Ref() string { return p.Program.Ref(p.Version) }

// BuildPrebuilt packs binDir/<name> into p's image for platform on the base
// (BaseFiles) and writes outDir/<name>.tar.
func BuildPrebuilt(binDir, outDir string, p Prebuilt, src Source, platform Platform) (Built, error) {
	bin, err := ReadFile("/"+p.Name, filepath.Join(binDir, p.Name), 0o755)
	if err != nil {
		return Built{}, fmt.Errorf("image %s: %w (make tools and make csi-bins build the prebuilt binaries)", p.Name, err)
	}
	spec, err := p.Spec(bin.Data, src, platform)
	if err != nil {
		return Built{}, fmt.Errorf("image %s: %w", p.Name, err)
	}
	spec.Cmd = p.Args
	img, err := Image(spec)
	if err != nil {
		return Built{}, fmt.Errorf("image %s: %w", p.Name, err)
	}
	b := Built{Program: p.Program, Ref: p.Ref(), Archive: filepath.Join(outDir, p.Name+".tar")}
	if b.Digest, err = img.Digest(); err != nil {
		return Built{}, fmt.Errorf("image %s: %w", p.Name, err)
	}
	b.Images = []PlatformImage{{Platform: platform, Digest: b.Digest}}
	if err := WriteArchive(b.Archive, b.Ref, img); err != nil {
		return Built{}, err
	}
	return b, nil
}
