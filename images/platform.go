package images

import (
	"fmt"
	"runtime"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Platform is an operating system and CPU architecture an image runs on, in Go's and
// OCI's spelling (linux/amd64, linux/arm64).
type Platform struct {
	// OS is GOOS and the image config's os, e.g. linux.
	OS string
	// Architecture is GOARCH and the image config's architecture, e.g. amd64.
	Architecture string
}

// Platforms nephele builds for.
var (
	// LinuxAMD64 is the platform of nephele's nodes, and of every image by default.
	LinuxAMD64 = Platform{OS: OS, Architecture: Architecture}
	// LinuxARM64 is the other platform release images are built for.
	LinuxARM64 = Platform{OS: "linux", Architecture: "arm64"}
)

// supportedPlatforms are the platforms a static, cgo-free nephele binary is known to
// cross-compile for cleanly (`GOARCH=arm64 CGO_ENABLED=0 go build` of every command).
var supportedPlatforms = []Platform{LinuxAMD64, LinuxARM64}

// HostPlatform is this machine's platform, linux and runtime.GOARCH: that of the nodes
// nephele runs here, whose images must match it. On an architecture nephele builds no
// images for it fails, naming GOARCH.
func HostPlatform() (Platform, error) { return hostPlatform(runtime.GOARCH) }

func hostPlatform(goarch string) (Platform, error) {
	p := Platform{OS: "linux", Architecture: goarch}
	if !slices.Contains(supportedPlatforms, p) {
		return Platform{}, fmt.Errorf("this machine's architecture, GOARCH=%s, is not one nephele builds images for (%s)", goarch, platformList(supportedPlatforms))
	}
	return p, nil
}

// String is os/architecture.
func (p Platform) String() string { return p.OS + "/" + p.Architecture }

// oci is p as a descriptor's platform.
func (p Platform) oci() *v1.Platform { return &v1.Platform{OS: p.OS, Architecture: p.Architecture} }

// ParsePlatforms parses a comma-separated list such as linux/amd64,linux/arm64. Each
// platform must be one nephele builds for and may be named once.
func ParsePlatforms(list string) ([]Platform, error) {
	var out []Platform
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		var p Platform
		for _, sp := range supportedPlatforms {
			if sp.String() == s {
				p = sp
			}
		}
		if p == (Platform{}) {
			return nil, fmt.Errorf("platform %q: want one of %s", s, platformList(supportedPlatforms))
		}
		for _, seen := range out {
			if seen == p {
				return nil, fmt.Errorf("platform %s is listed twice", p)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

func platformList(ps []Platform) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.String()
	}
	return strings.Join(names, ", ")
}
