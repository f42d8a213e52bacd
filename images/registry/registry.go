package registry

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
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

// Limits of what a push may send.
const (
	// maxPushBody bounds one request body on the push listener: a blob, a manifest. The
	// largest image nephele pushes is tens of MiB; upstream's e2e images a few hundred.
	maxPushBody = 2 << 30
)

// Server is a running registry: it serves pulls on Options.Listen and takes pushes only
// on a loopback listener of its own with a bearer token it makes, which only its own
// process holds. Close stops it.
type Server struct {
	ln, pushLn     net.Listener
	http, pushHTTP *http.Server
	token          string
	done           chan struct{}
	err            error
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
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("registry: push token: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("registry: listen on %s: %w", o.Listen, err)
	}
	pushLn, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("registry: push listener: %w", err), ln.Close())
	}
	// One registry behind both listeners: pushes through one are pulled through the other.
	reg := registry.New(
		registry.Logger(log.New(logOut, "registry: ", log.LstdFlags)),
		registry.WithBlobHandler(registry.NewDiskBlobHandler(o.Dir)),
	)
	s := &Server{ln: ln, pushLn: pushLn, token: hex.EncodeToString(raw), done: make(chan struct{})}
	s.http = &http.Server{Handler: readOnly(reg), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	s.pushHTTP = &http.Server{Handler: s.authorized(reg), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errs := make(chan error, 2)
	for _, sv := range []struct {
		srv *http.Server
		ln  net.Listener
	}{{s.http, ln}, {s.pushHTTP, pushLn}} {
		go func() {
			err := sv.srv.Serve(sv.ln)
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			errs <- err
		}()
	}
	go func() {
		defer close(s.done)
		s.err = errors.Join(<-errs, <-errs)
	}()
	return s, nil
}

// readOnly serves what pulling needs, GET and HEAD, and refuses every other method: on
// the address the nodes reach, every pod and local user could otherwise replace the
// pause image or the cloud-controller-manager's, which runs with the cloud's credentials.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "this registry is read-only here: images are pushed by nephele up", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// authorized serves h to requests with the push token, and answers the registry API's
// ping (GET /v2/) without it, as distribution's clients ask it first to learn how to
// authenticate. Bodies are capped.
func (s *Server) authorized(h http.Handler) http.Handler {
	want := []byte("Bearer " + s.token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ping := r.Method == http.MethodGet && r.URL.Path == "/v2/"
		if !ping && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, "pushes need this registry's token", http.StatusUnauthorized)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxPushBody)
		h.ServeHTTP(w, r)
	})
}

// PushAddr is the loopback host:port pushes go to; they need the token only this
// Server holds (PushArchive, PushImage and PushIndex send it).
func (s *Server) PushAddr() string { return s.pushLn.Addr().String() }

// Addr is the host:port the registry serves pulls on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the registry's base URL, http://host:port: the endpoint a containerd
// hosts.toml names.
func (s *Server) URL() string { return "http://" + s.Addr() }

// Close stops serving, waiting for requests in flight until ctx ends.
func (s *Server) Close(ctx context.Context) error {
	var err error
	for _, srv := range []*http.Server{s.http, s.pushHTTP} {
		if e := srv.Shutdown(ctx); e != nil {
			err = errors.Join(err, e, srv.Close())
		}
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
	if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx), s.auth()); err != nil {
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
	if err := remote.Write(tag, img, remote.WithContext(ctx), s.auth()); err != nil {
		return Pushed{}, fmt.Errorf("push %s to %s: %w", ref, s.Addr(), err)
	}
	d, err := img.Digest()
	if err != nil {
		return Pushed{}, fmt.Errorf("push %s: digest: %w", ref, err)
	}
	return Pushed{Ref: ref, Digest: d}, nil
}

// auth is the push token for go-containerregistry's client.
func (s *Server) auth() remote.Option {
	return remote.WithAuth(&authn.Bearer{Token: s.token})
}

// here is ref's repository and tag in this server's push listener.
func (s *Server) here(ref string) (name.Tag, error) {
	t, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("image reference %q: want registry/repository:tag: %w", ref, err)
	}
	tag, err := name.NewTag(s.pushLn.Addr().String()+"/"+t.RepositoryStr()+":"+t.TagStr(), name.Insecure)
	if err != nil {
		return name.Tag{}, fmt.Errorf("image reference %q in %s: %w", ref, s.pushLn.Addr(), err)
	}
	return tag, nil
}
