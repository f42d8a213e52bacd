package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/nephele-dev/nephele/images"
)

// Options configure a Server.
type Options struct {
	// Listen is the host:port to serve on; port 0 picks a free one (see Server.Addr).
	// Required: a registry is never served on every address of the machine.
	Listen string
	// Dir holds the blobs. Required; created when missing.
	Dir string
	// Log, when set, receives one line per request (go-containerregistry's logger).
	Log io.Writer
}

// Server is a running registry. Close stops it.
type Server struct {
	ln   net.Listener
	http *http.Server
	done chan struct{}
	err  error
}

// Start serves a registry on o.Listen until Close.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Listen == "" {
		return nil, errors.New("registry: Listen is required (host:port)")
	}
	if o.Dir == "" {
		return nil, errors.New("registry: Dir is required")
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("registry: blob directory: %w", err)
	}
	logOut := o.Log
	if logOut == nil {
		logOut = io.Discard
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("registry: listen on %s: %w", o.Listen, err)
	}
	s := &Server{
		ln:   ln,
		done: make(chan struct{}),
		http: &http.Server{
			Handler: registry.New(
				registry.Logger(log.New(logOut, "registry: ", log.LstdFlags)),
				registry.WithBlobHandler(registry.NewDiskBlobHandler(o.Dir)),
			),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
		},
	}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
	}()
	return s, nil
}

// Addr is the host:port the registry serves on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the registry's base URL, http://host:port: the endpoint a containerd
// hosts.toml names.
func (s *Server) URL() string { return "http://" + s.Addr() }

// Close stops serving, waiting for requests in flight until ctx ends.
func (s *Server) Close(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.http.Close())
	}
	<-s.done
	if s.err != nil {
		err = errors.Join(err, fmt.Errorf("registry: serving: %w", s.err))
	}
	return err
}

// Pushed is an image a push put in the registry.
type Pushed struct {
	// Ref is the reference nodes pull it by: the archive's, or the one asked for.
	Ref string
	// Digest is the digest of its manifest or image index.
	Digest v1.Hash
}

// PushArchive pushes the image (or multi-platform image index) in an archive that
// images.WriteArchive or images.WriteIndexArchive wrote. It is stored under the
// repository and tag of ref, or of the reference the archive names when ref is empty:
// whatever registry host the reference names (images.Registry), the image goes into
// this server, which the nodes reach by that name.
func (s *Server) PushArchive(ctx context.Context, archive, ref string) (Pushed, error) {
	dir, err := os.MkdirTemp("", "nephele-push-*")
	if err != nil {
		return Pushed{}, fmt.Errorf("push %s: %w", archive, err)
	}
	defer os.RemoveAll(dir)
	archiveRef, root, err := images.ExtractArchive(archive, dir)
	if err != nil {
		return Pushed{}, fmt.Errorf("push %s: %w", archive, err)
	}
	if ref == "" {
		ref = archiveRef
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return Pushed{}, fmt.Errorf("push %s: %w", archive, err)
	}
	if root.MediaType.IsIndex() {
		idx, err := p.ImageIndex()
		if err == nil {
			idx, err = idx.ImageIndex(root.Digest)
		}
		if err != nil {
			return Pushed{}, fmt.Errorf("push %s: image index %s: %w", archive, root.Digest, err)
		}
		return s.PushIndex(ctx, ref, idx)
	}
	img, err := p.Image(root.Digest)
	if err != nil {
		return Pushed{}, fmt.Errorf("push %s: image %s: %w", archive, root.Digest, err)
	}
	return s.PushImage(ctx, ref, img)
}

// PushIndex pushes a multi-platform image under ref's repository and tag (see
// PushArchive).
func (s *Server) PushIndex(ctx context.Context, ref string, idx v1.ImageIndex) (Pushed, error) {
	tag, err := s.here(ref)
	if err != nil {
		return Pushed{}, err
	}
	if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx)); err != nil {
		return Pushed{}, fmt.Errorf("push %s to %s: %w", ref, s.Addr(), err)
	}
	d, err := idx.Digest()
	if err != nil {
		return Pushed{}, fmt.Errorf("push %s: digest: %w", ref, err)
	}
	return Pushed{Ref: ref, Digest: d}, nil
}

// PushImage pushes one image under ref's repository and tag (see PushArchive).
func (s *Server) PushImage(ctx context.Context, ref string, img v1.Image) (Pushed, error) {
	tag, err := s.here(ref)
	if err != nil {
		return Pushed{}, err
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		return Pushed{}, fmt.Errorf("push %s to %s: %w", ref, s.Addr(), err)
	}
	d, err := img.Digest()
	if err != nil {
		return Pushed{}, fmt.Errorf("push %s: digest: %w", ref, err)
	}
	return Pushed{Ref: ref, Digest: d}, nil
}

// here is ref's repository and tag in this server.
func (s *Server) here(ref string) (name.Tag, error) {
	t, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("image reference %q: want registry/repository:tag: %w", ref, err)
	}
	tag, err := name.NewTag(s.Addr()+"/"+t.RepositoryStr()+":"+t.TagStr(), name.Insecure)
	if err != nil {
		return name.Tag{}, fmt.Errorf("image reference %q in %s: %w", ref, s.Addr(), err)
	}
	return tag, nil
}
