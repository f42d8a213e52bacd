package localcluster

import (
	"context"

	"github.com/nephele-dev/nephele/images"
)

// BuildImages builds every image a real cluster's registry serves into outDir, for this
// machine's platform: nephele's programs (Images), compiled from the nephele tree at
// moduleDir, and the prebuilt ones (images.Prebuilts: CoreDNS, the CSI sidecars) packed from the binaries
// make tools put in binDir. `nephele node images` and Config.BuildFrom both build with it.
func BuildImages(ctx context.Context, moduleDir, binDir, outDir string, src images.Source) ([]images.Built, error) {
	platform, err := images.HostPlatform()
	if err != nil {
		return nil, err
	}
	built, err := images.Build(ctx, images.BuildOptions{ModuleDir: moduleDir, OutDir: outDir, Source: src,
		Platforms: []images.Platform{platform}}, Images...)
	if err != nil {
		return nil, err
	}
	for _, p := range images.Prebuilts {
		b, err := images.BuildPrebuilt(binDir, outDir, p, src, platform)
		if err != nil {
			return nil, err
		}
		built = append(built, b)
	}
	return built, nil
}

// imageArchives are the names (<name>.tar in ImageDir) of every image a real cluster's
// registry serves.
func imageArchives() []string {
	names := make([]string, 0, len(Images)+len(images.Prebuilts))
	for _, p := range Images {
		names = append(names, p.Name)
	}
	for _, p := range images.Prebuilts {
		names = append(names, p.Name)
	}
	return names
}
