package registry_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/images/registry"
)

func startRegistry(t *testing.T) *registry.Server {
	t.Helper()
	s, err := registry.Start(t.Context(), registry.Options{Listen: "127.0.0.1:0", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return s
}

func TestPushArchive(t *testing.T) {
	s := startRegistry(t)
	dir := t.TempDir()

	img, err := random.Image(512, 2)
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img})
	wantIdx, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	wantImg, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	indexArchive := filepath.Join(dir, "index.tar")
	if err := images.WriteIndexArchive(indexArchive, "nephele.local/multi:dev", idx); err != nil {
		t.Fatal(err)
	}
	imageArchive := filepath.Join(dir, "image.tar")
	if err := images.WriteArchive(imageArchive, "nephele.local/single:v1", img); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, archive, ref string
		wantRef, pullRepo  string
		want               string
	}{
		{name: "index under its own name", archive: indexArchive, wantRef: "nephele.local/multi:dev", pullRepo: "multi:dev", want: wantIdx.String()},
		{name: "index under a second tag", archive: indexArchive, ref: "nephele.local/multi:v2", wantRef: "nephele.local/multi:v2", pullRepo: "multi:v2", want: wantIdx.String()},
		{name: "one image", archive: imageArchive, wantRef: "nephele.local/single:v1", pullRepo: "single:v1", want: wantImg.String()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.PushArchive(t.Context(), tc.archive, tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			if got.Ref != tc.wantRef || got.Digest.String() != tc.want {
				t.Fatalf("pushed %s %s, want %s %s", got.Ref, got.Digest, tc.wantRef, tc.want)
			}
			// A client pulls it back by the registry's address, as containerd does.
			ref, err := name.ParseReference(s.Addr()+"/"+tc.pullRepo, name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			desc, err := remote.Head(ref, remote.WithContext(t.Context()))
			if err != nil {
				t.Fatal(err)
			}
			if desc.Digest.String() != tc.want {
				t.Fatalf("registry serves %s as %s, want %s", tc.pullRepo, desc.Digest, tc.want)
			}
		})
	}
}

func TestPushArchiveRefusesBadInput(t *testing.T) {
	s := startRegistry(t)
	dir := t.TempDir()
	notTar := filepath.Join(dir, "not.tar")
	if err := os.WriteFile(notTar, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.tar")
	if err := images.WriteArchive(good, "nephele.local/x:dev", img); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, archive, ref, want string
	}{
		{"missing file", filepath.Join(dir, "missing.tar"), "", "no such file"},
		{"not an archive", notTar, "", "not.tar"},
		{"bad reference", good, "Not A Ref", `image reference "Not A Ref"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.PushArchive(t.Context(), tc.archive, tc.ref)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestStartNeedsAnAddress(t *testing.T) {
	if _, err := registry.Start(t.Context(), registry.Options{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "Listen") {
		t.Fatalf("error %v, want one naming Listen", err)
	}
}

// TestPushesNeedTheServersToken tries what any pod or local user could: push an image,
// overwrite a tag and delete a manifest, on the pull address and on the push listener
// without the token. Each is refused, and the server's own push still works.
func TestPushesNeedTheServersToken(t *testing.T) {
	s := startRegistry(t)
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "pause.tar")
	if err := images.WriteArchive(archive, "nephele.local/pause:dev", img); err != nil {
		t.Fatal(err)
	}
	pushed, err := s.PushArchive(t.Context(), archive, "")
	if err != nil {
		t.Fatalf("the server's own push: %v", err)
	}
	evil, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{s.Addr(), s.PushAddr()} {
		tag, err := name.NewTag(addr+"/pause:dev", name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(tag, evil, remote.WithContext(t.Context())); err == nil {
			t.Errorf("an anonymous push to %s succeeded", addr)
		}
		digest := tag.Context().Digest(pushed.Digest.String())
		if err := remote.Delete(digest, remote.WithContext(t.Context())); err == nil {
			t.Errorf("an anonymous delete at %s succeeded", addr)
		}
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			req, err := http.NewRequestWithContext(t.Context(), method, "http://"+addr+"/v2/pause/blobs/uploads/", strings.NewReader("x"))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed && resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s without the token: %s, want 405 or 401", method, addr, resp.Status)
			}
		}
	}
	// The tag still names what the server pushed, and pulls work without a token.
	ref, err := name.ParseReference(s.Addr()+"/pause:dev", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref, remote.WithContext(t.Context()))
	if err != nil || desc.Digest != pushed.Digest {
		t.Fatalf("pause:dev is %v (%v), want the server's push %s", desc, err, pushed.Digest)
	}
}
