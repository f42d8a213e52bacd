package e2eimages

import (
	"archive/tar"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"sigs.k8s.io/yaml"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/internal/testkit/hoststest"
)

// requireDebianPrograms fails (under CI=true) or skips the test when the Debian programs
// the images are made of are missing: hack/install-node-deps.sh --e2e installs them.
func requireDebianPrograms(t *testing.T) {
	t.Helper()
	err := exec.Command("../../hack/install-node-deps.sh", "--check", "--e2e").Run()
	if err == nil {
		return
	}
	hoststest.Unavailable(t, fmt.Sprintf("the e2e images' Debian programs are missing: run hack/install-node-deps.sh --e2e (make e2e-deps): %v", err))
}

// TestBuild builds every image and checks what the suite runs in each is there, with
// the libraries its loader needs.
func TestBuild(t *testing.T) {
	requireDebianPrograms(t)
	out := t.TempDir()
	// Any dynamically linked program stands in for agnhost (make e2e-bins builds it).
	agnhost, err := exec.LookPath("getent")
	if err != nil {
		t.Fatal(err)
	}
	// Stand-ins for upstream's programs and pictures: the test checks where they go.
	nnp, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		hoststest.Unavailable(t, "no busybox on this machine: run hack/install-node-deps.sh --e2e (make e2e-deps)")
	}
	files := t.TempDir()
	for _, name := range []string{"kitten", "nautilus"} {
		dir := filepath.Join(files, name, "html")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{name + ".jpg", "data.json"} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(name), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	built, err := Build(t.Context(), Options{AgnhostBinary: agnhost, NonewprivsBinary: nnp, RegressionIssue74839Binary: nnp,
		SampleAPIServerBinary: nnp, EtcdBinary: nnp, BusyboxBinary: busybox, CorednsBinary: nnp, ImageFiles: files, OutDir: out})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		files      []string
		entrypoint []string
	}{
		"agnhost": {[]string{"/agnhost", "/bin/sh", "/bin/bash", "/usr/bin/nc", "/usr/bin/curl", "/usr/bin/wget",
			"/usr/bin/dig", "/usr/bin/nslookup", "/usr/bin/getent", "/usr/bin/seq", "/usr/bin/grep", "/bin/busybox", "/bin/dd", "/bin/od", "/bin/sleep", "/bin/false", "/coredns",
			"/lib64/ld-linux-x86-64.so.2", "/etc/nsswitch.conf", "/etc/wgetrc", "/tmp/", "/uploads/", "/localhost.crt", "/localhost.key"}, []string{"/agnhost"}},
		"glibc-dns-testing":      {[]string{"/bin/sh", "/usr/bin/dig", "/usr/bin/getent", "/usr/bin/seq"}, []string{"/bin/sh"}},
		"nginx":                  {[]string{"/usr/sbin/nginx", "/etc/nginx/nginx.conf", "/etc/nginx/mime.types", "/usr/share/nginx/html/index.html", "/bin/sh", "/usr/bin/chmod"}, []string{"/usr/sbin/nginx", "-g", "daemon off;"}},
		"kitten":                 {[]string{"/agnhost", "/kitten.jpg", "/data.json"}, []string{"/agnhost"}},
		"nautilus":               {[]string{"/agnhost", "/nautilus.jpg", "/data.json"}, []string{"/agnhost"}},
		"nonewprivs":             {[]string{"/usr/local/bin/nnp"}, []string{"/usr/local/bin/nnp"}},
		"regression-issue-74839": {[]string{"/regression-issue-74839"}, []string{"/regression-issue-74839"}},
		"sample-apiserver":       {[]string{"/sample-apiserver"}, []string{"/sample-apiserver"}},
		"etcd":                   {[]string{"/usr/local/bin/etcd"}, []string{"/usr/local/bin/etcd"}},
		"distroless-iptables":    {[]string{"/usr/sbin/iptables", "/usr/sbin/conntrack", "/bin/sh", "/bin/sleep", "/bin/which", "/usr/bin/grep"}, []string{"/bin/sh"}},
		"busybox":                {[]string{"/bin/busybox", "/bin/sh", "/bin/ash", "/bin/wget", "/bin/hexdump", "/bin/sysctl", "/bin/["}, []string{"/bin/sh"}},
	}
	if len(built) != len(want) {
		t.Fatalf("built %d images, want %d", len(built), len(want))
	}
	for _, b := range built {
		w, ok := want[b.Image.Name]
		if !ok {
			t.Errorf("built an unexpected image %s", b.Image.Name)
			continue
		}
		files, entrypoint, modes := readArchive(t, b.Archive)
		for _, f := range w.files {
			if !slices.Contains(files, strings.TrimPrefix(f, "/")) {
				t.Errorf("%s: no %s in the image", b.Image.Name, f)
			}
		}
		if !slices.Equal(entrypoint, w.entrypoint) {
			t.Errorf("%s: entrypoint %q, want %q", b.Image.Name, entrypoint, w.entrypoint)
		}
		if b.Image == Nonewprivs && modes["usr/local/bin/nnp"]&0o4000 == 0 {
			t.Errorf("nonewprivs: nnp has mode %o, want setuid", modes["usr/local/bin/nnp"])
		}
		// The images of Debian's dynamically linked programs carry their libraries.
		dynamic := []Image{Agnhost, GlibcDNSTesting, Nginx, DistrolessIptables}
		if slices.Contains(dynamic, b.Image) && !slices.ContainsFunc(files, func(f string) bool { return strings.HasSuffix(f, "/libc.so.6") }) {
			t.Errorf("%s: no libc.so.6 in the image: the programs' libraries are missing", b.Image.Name)
		}
	}
}

// readArchive returns the paths in the single layer of the image an archive holds, its
// entrypoint and each path's mode.
func readArchive(t *testing.T, archive string) ([]string, []string, map[string]int64) {
	t.Helper()
	dir := t.TempDir()
	_, root, err := images.ExtractArchive(archive, dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	img, err := p.Image(root.Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var files []string
	modes := map[string]int64{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, h.Name)
		modes[h.Name] = h.Mode
	}
	return files, cf.Config.Entrypoint, modes
}

// TestBuildNamesWhatIsMissing: Build refuses options without the programs it packs,
// naming each field, before it builds anything.
func TestBuildNamesWhatIsMissing(t *testing.T) {
	out := t.TempDir()
	_, err := Build(t.Context(), Options{AgnhostBinary: "/x", OutDir: out})
	want := "e2e images: Options need CorednsBinary, BusyboxBinary, ImageFiles, NonewprivsBinary, RegressionIssue74839Binary, SampleAPIServerBinary, EtcdBinary"
	if err == nil || err.Error() != want {
		t.Fatalf("Build() = %v, want %q", err, want)
	}
	// Only the fields of the images asked for are needed; an image Build does not
	// build is refused, not skipped.
	_, err = Build(t.Context(), Options{OutDir: out, Only: []Image{Kitten}})
	if want := "e2e images: Options need AgnhostBinary, ImageFiles"; err == nil || err.Error() != want {
		t.Errorf("Build(Only kitten) = %v, want %q", err, want)
	}
	_, err = Build(t.Context(), Options{OutDir: out, Only: []Image{Pause}})
	if want := "e2e images: Options.Only names nephele.local/pause:3.10.2, which Build does not build"; err == nil || err.Error() != want {
		t.Errorf("Build(Only pause) = %v, want %q", err, want)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("Build wrote %d files before refusing", len(entries))
	}
}

// TestBuildOnly: with Options.Only, Build builds those images and no other, from the
// options they need alone.
func TestBuildOnly(t *testing.T) {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		hoststest.Unavailable(t, "no busybox on this machine: run hack/install-node-deps.sh --e2e (make e2e-deps)")
	}
	out := t.TempDir()
	built, err := Build(t.Context(), Options{BusyboxBinary: busybox, OutDir: out, Only: []Image{BusyBox}})
	if err != nil {
		t.Fatal(err)
	}
	if len(built) != 1 || built[0].Image != BusyBox {
		t.Fatalf("built %v, want busybox alone", built)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 1 {
		t.Errorf("%d files in the output, want busybox's archive alone", len(entries))
	}
}

// TestProgramLinks: programs answer at /bin and /usr/bin alike (merged /usr), the
// packed programs win over busybox's applets, and an applet fills what nothing packs.
func TestProgramLinks(t *testing.T) {
	files := []images.File{
		{Path: "/usr/bin/sleep"}, {Path: "/usr/sbin/ip"}, {Path: "/bin/sh", Link: "dash"},
		{Path: "/usr/bin/sh"}, {Path: "/agnhost"}, {Path: "/usr/bin/wget"},
	}
	merged := usrMerged(files)
	want := map[string]string{"/bin/sleep": "../usr/bin/sleep", "/sbin/ip": "../usr/sbin/ip", "/bin/wget": "../usr/bin/wget"}
	if len(merged) != len(want) {
		t.Errorf("usrMerged linked %v, want %v", merged, want)
	}
	for _, l := range merged {
		if want[l.Path] != l.Link {
			t.Errorf("usrMerged: %s -> %s, want -> %q", l.Path, l.Link, want[l.Path])
		}
	}
	links := appletLinks(append(files, merged...), []string{"sleep", "wget", "dd", "ip", "od"})
	var got []string
	for _, l := range links {
		if l.Link != "busybox" {
			t.Errorf("applet %s links to %s, want busybox", l.Path, l.Link)
		}
		got = append(got, l.Path)
	}
	if !slices.Equal(got, []string{"/bin/dd", "/bin/od"}) {
		t.Errorf("applets linked: %v, want /bin/dd and /bin/od only (the rest are packed)", got)
	}
}

// TestBusyboxShellKeepsEveryVariable runs the busybox image's files from a directory:
// its sh passes on environment variables whose names are not shell identifiers (as
// upstream's busybox does; upstream's "consumable via the environment" tests look for
// "data-1=value-1" in `sh -c env`), and applets such as hexdump answer.
func TestBusyboxShellKeepsEveryVariable(t *testing.T) {
	bin, err := controlplane.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	busybox := filepath.Join(bin, "busybox")
	if _, err := os.Stat(busybox); err != nil {
		hoststest.Unavailable(t, fmt.Sprintf("%v: run make e2e-bins (make test builds it)", err))
	}
	spec, err := busyboxSpec(t.Context(), Options{BusyboxBinary: busybox})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, f := range spec.Files {
		p := filepath.Join(root, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case f.Dir:
			err = os.MkdirAll(p, 0o755)
		case f.Link != "":
			err = os.Symlink(f.Link, p)
		default:
			err = os.WriteFile(p, f.Data, os.FileMode(f.Mode))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, script, want string
	}{
		{"env keeps data-1", "env", "data-1=value-1"},
		{"env keeps the prefixed name", "env", "p-data-1=value-1"},
		{"hexdump is an applet", "printf AB | " + filepath.Join(root, "bin/hexdump") + " -C", "41 42"},
		// Upstream's "should not write to root filesystem" compares ash's message word
		// for word ("can't create /file: Read-only file system"); bash says it otherwise.
		{"the shell is ash", "echo test > " + filepath.Join(root, "no-such-dir", "file") + " || true", "can't create " + filepath.Join(root, "no-such-dir", "file")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), filepath.Join(root, "bin/sh"), "-c", tc.script)
			cmd.Env = []string{"PATH=" + filepath.Join(root, "bin"), "data-1=value-1", "p-data-1=value-1"}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("sh -c %q: %v: %s", tc.script, err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("sh -c %q printed %q, want %q in it", tc.script, out, tc.want)
			}
		})
	}
}

// TestRepoList checks that every family of the suite's RegistryList points into the
// cluster's registry, and that the images are named as the suite names them.
func TestRepoList(t *testing.T) {
	data, err := RepoList()
	if err != nil {
		t.Fatal(err)
	}
	var list map[string]string
	if err := yaml.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	// The keys of k8s.io/kubernetes/test/utils/image.RegistryList in v1.36.3.
	keys := []string{"promoterE2eRegistry", "buildImageRegistry", "invalidRegistry", "gcEtcdRegistry", "gcRegistry",
		"sigStorageRegistry", "privateRegistry", "dockerLibraryRegistry", "cloudProviderGcpRegistry"}
	for _, k := range keys {
		if v := list[k]; v != images.Registry && !strings.HasPrefix(v, images.Registry+"/") {
			t.Errorf("%s: %q, want a prefix in %s", k, v, images.Registry)
		}
	}
	if len(list) != len(keys) {
		t.Errorf("repo list has %d keys, want %d: %v", len(list), len(keys), list)
	}
	for _, tc := range []struct {
		img  Image
		want string
	}{
		{Agnhost, "nephele.local/e2e-test-images/agnhost:2.63.0"},
		{GlibcDNSTesting, "nephele.local/e2e-test-images/glibc-dns-testing:2.0.0"},
		{Nginx, "nephele.local/e2e-test-images/nginx:1.15-4"},
		{Pause, "nephele.local/pause:3.10.2"},
	} {
		if got := tc.img.Ref(); got != tc.want {
			t.Errorf("%s: Ref() = %s, want %s", tc.img.Name, got, tc.want)
		}
	}
}

// TestWgetTriesOnce: with the agnhost image's /etc/wgetrc, GNU wget gives up after one
// try on a target that does not answer, as busybox's wget in upstream's image does. The
// listener accepts and never answers; wget's retries would be further connections.
func TestWgetTriesOnce(t *testing.T) {
	wget, err := exec.LookPath("wget")
	if err != nil {
		hoststest.Unavailable(t, "no wget on this machine: run hack/install-node-deps.sh --e2e (make e2e-deps)")
	}
	rc := filepath.Join(t.TempDir(), "wgetrc")
	if err := os.WriteFile(rc, []byte(wgetrc), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			conns = append(conns, c) // held open, never answered
		}
	}()
	// SYSTEM_WGETRC stands in for the image's /etc/wgetrc; a HOME of its own keeps a
	// user's ~/.wgetrc out.
	cmd := exec.CommandContext(t.Context(), wget, "-T", "1", "-qO-", "http://"+ln.Addr().String()+"/")
	cmd.Env = append(os.Environ(), "SYSTEM_WGETRC="+rc, "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	_ = ln.Close()
	<-done
	if err == nil {
		t.Fatalf("wget reached a target that never answers: %s", out)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("wget connected %d times, want 1 (one try): %s", n, out)
	}
}
