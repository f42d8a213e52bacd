package localcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/images/registry"
	"github.com/nephele-dev/nephele/kubenode"
)

// startRegistry serves the cluster's registry on the bridge's address, which the nodes
// reach and nothing outside the machine does, and pushes every image of Images into it
// from the archives in ImageDir. Nodes pull nephele's images (images.Registry/...) from
// it: their containerd's hosts.toml points that registry host at it.
func (c *Cluster) startRegistry(ctx context.Context) (string, error) {
	log, err := os.OpenFile(filepath.Join(c.cfg.registryDir(), "registry.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", fmt.Errorf("registry log: %w", err)
	}
	c.registryLog = log
	reg, err := registry.Start(ctx, registry.Options{
		Listen: net.JoinHostPort(c.Gateway.String(), "0"),
		Dir:    filepath.Join(c.cfg.registryDir(), "blobs"),
		Log:    log,
	})
	if err != nil {
		return "", err
	}
	c.Registry = reg
	c.pushed = map[string]registry.Pushed{}
	var pushed []string
	for _, name := range imageArchives() {
		p, err := reg.PushArchive(ctx, filepath.Join(ImageDir(c.cfg.BinDir), name+".tar"), "")
		if err != nil {
			return "", err
		}
		c.pushed[name] = p
		pushed = append(pushed, p.Ref)
	}
	return reg.URL() + ": " + strings.Join(pushed, ", "), nil
}

// PinnedImage is the reference of the image program in the cluster's registry by the
// digest Start pushed (nephele.local/<name>@sha256:...): what the cluster's manifests
// run, so that a tag moved behind the cluster's back could not change what runs with the
// cloud's credentials. It fails for an image the cluster did not push.
func (c *Cluster) PinnedImage(program images.Program) (string, error) {
	p, ok := c.pushed[program.Name]
	if !ok {
		return "", fmt.Errorf("localcluster: image %s was not pushed to the cluster's registry", program.Name)
	}
	tag, err := name.NewTag(p.Ref, name.StrictValidation)
	if err != nil {
		return "", fmt.Errorf("localcluster: image %s: %w", p.Ref, err)
	}
	return tag.Context().Digest(p.Digest.String()).String(), nil
}

// nodeRegistries are the registries of every node's containerd: nephele's registry name
// served by the cluster's registry.
func (c *Cluster) nodeRegistries() []kubenode.Registry {
	return []kubenode.Registry{{Host: images.Registry, Endpoint: c.Registry.URL()}}
}
