package e2eimages

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/yaml"

	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/internal/pki"
)

// Family is an image family of the suite: a key of KUBE_TEST_REPO_LIST
// (k8s.io/kubernetes/test/utils/image.RegistryList).
type Family string

// The families of v1.36.3's RegistryList.
const (
	PromoterE2E      Family = "promoterE2eRegistry"
	BuildImage       Family = "buildImageRegistry"
	Invalid          Family = "invalidRegistry"
	GCEtcd           Family = "gcEtcdRegistry"
	GC               Family = "gcRegistry"
	SigStorage       Family = "sigStorageRegistry"
	Private          Family = "privateRegistry"
	DockerLibrary    Family = "dockerLibraryRegistry"
	CloudProviderGCP Family = "cloudProviderGcpRegistry"
)

// prefixes are where each family lives under images.Registry, mirroring the upstream
// registries' paths so that two families never share a repository by accident. Invalid
// and Private name repositories nothing is pushed to: the tests that use them expect a
// pull to fail, and it fails here too, inside the machine.
var prefixes = map[Family]string{
	PromoterE2E:      "e2e-test-images",
	BuildImage:       "build-image",
	Invalid:          "invalid",
	GCEtcd:           "",
	GC:               "",
	SigStorage:       "sig-storage",
	Private:          "k8s-authenticated-test",
	DockerLibrary:    "library",
	CloudProviderGCP: "cloud-provider-gcp",
}

// Prefix is the registry prefix of f's images: images.Registry and f's path.
func (f Family) Prefix() string {
	if p := prefixes[f]; p != "" {
		return images.Registry + "/" + p
	}
	return images.Registry
}

// RepoList is the KUBE_TEST_REPO_LIST file (or --kube-test-repo-list) that points every
// family of the suite at the cluster's registry.
func RepoList() ([]byte, error) {
	list := map[string]string{}
	for f := range prefixes {
		list[string(f)] = f.Prefix()
	}
	data, err := yaml.Marshal(list)
	if err != nil {
		return nil, fmt.Errorf("repo list: %w", err)
	}
	return append([]byte("# KUBE_TEST_REPO_LIST written by nephele: every image family of the e2e suite in the cluster's registry.\n"), data...), nil
}

// Image is a test image by the name and version the suite asks for.
type Image struct {
	Family  Family
	Name    string
	Version string
}

// Ref is the reference the suite's pods name, e.g.
// nephele.local/e2e-test-images/agnhost:2.63.0.
func (i Image) Ref() string { return i.Family.Prefix() + "/" + i.Name + ":" + i.Version }

// The images nephele builds, named as test/utils/image/manifest.go names them in v1.36.3.
var (
	Agnhost         = Image{PromoterE2E, "agnhost", "2.63.0"}
	GlibcDNSTesting = Image{PromoterE2E, "glibc-dns-testing", "2.0.0"}
	Nginx           = Image{PromoterE2E, "nginx", "1.15-4"}
	BusyBox         = Image{PromoterE2E, "busybox", "1.37.0-1"}
	// AgnhostPrev is the version of agnhost tests roll from and back to (StatefulSet and
	// Deployment updates, kubectl's replace): the same agnhost image under the older
	// tag, since those tests change the image's name and never ask what is in it.
	AgnhostPrev = Image{PromoterE2E, "agnhost", "2.55"}
	// Kitten and Nautilus are agnhost's test-webserver serving one picture and a
	// data.json naming it, as upstream's (kubectl's Update Demo rolls from one to the
	// other and reads data.json through the apiserver's pod proxy).
	Kitten   = Image{PromoterE2E, "kitten", "1.8"}
	Nautilus = Image{PromoterE2E, "nautilus", "1.8"}
	// Nonewprivs is upstream's nnp program, setuid root, which prints its effective uid:
	// the allowPrivilegeEscalation tests read it.
	Nonewprivs = Image{PromoterE2E, "nonewprivs", "1.4"}
	// RegressionIssue74839 is upstream's boom-server, which sends a TCP segment out of
	// the window to show a proxy that NATs conntrack's INVALID packets wrongly.
	RegressionIssue74839 = Image{PromoterE2E, "regression-issue-74839", "1.4"}
	// DistrolessIptables is a privileged host-network tool image: iptables and
	// conntrack with a shell (the CLOSE_WAIT test reads conntrack's table with it).
	DistrolessIptables = Image{BuildImage, "distroless-iptables", "v0.9.6"}
	// SampleAPIServer is k8s.io/sample-apiserver (v0.36.3, where upstream's tag says
	// 1.29.2) and Etcd the etcd beside it in its pod: the aggregator's Conformance test
	// registers it as an APIService.
	SampleAPIServer = Image{PromoterE2E, "sample-apiserver", "1.29.2"}
	Etcd            = Image{GCEtcd, "etcd", "3.6.8-0"}
	// Pause is nephele's pause image (images.Pause) under upstream's name: pushed from
	// its archive, not built again.
	Pause = Image{GC, "pause", "3.10.2"}
)

// Options say what Build builds from and where it writes.
type Options struct {
	// AgnhostBinary is agnhost built for this machine (make e2e-bins: bin/agnhost).
	AgnhostBinary string
	// NonewprivsBinary is upstream's test/images/nonewprivs program (make e2e-bins:
	// bin/nonewprivs).
	NonewprivsBinary string
	// RegressionIssue74839Binary is upstream's test/images/regression-issue-74839
	// program (make e2e-bins: bin/regression-issue-74839).
	RegressionIssue74839Binary string
	// CorednsBinary is the CoreDNS nephele builds for cluster DNS (make tools:
	// bin/coredns); upstream's agnhost image carries one at /coredns, which the DNS
	// tests run as a pod's name server.
	CorednsBinary string
	// BusyboxBinary is upstream busybox, static (make e2e-bins: bin/busybox, built by
	// hack/build-busybox.sh).
	BusyboxBinary string
	// SampleAPIServerBinary is k8s.io/sample-apiserver (make e2e-bins:
	// bin/sample-apiserver).
	SampleAPIServerBinary string
	// EtcdBinary is the etcd the control plane runs (make tools: bin/etcd).
	EtcdBinary string
	// Only, when set, are the images to build (each with its AlsoAs names), and Build
	// needs only their fields; nil builds every image. Naming one Build does not build
	// (Pause, AgnhostPrev) is an error. A run of a few tests needs few of them, and the large ones
	// (sample-apiserver, kitten and nautilus with agnhost inside) cost minutes to pack.
	Only []Image
	// ImageFiles holds the files of upstream's test images that are not programs
	// (make e2e-bins: bin/e2e-image-files, copied from k8s.io/kubernetes/test/images):
	// kitten/html and nautilus/html.
	ImageFiles string
	// OutDir receives one archive per image, <name>.tar.
	OutDir string
	// Source gives the images' labels.
	Source images.Source
}

// Built is an image Build wrote.
type Built struct {
	Image   Image
	Archive string
	Digest  v1.Hash
	// AlsoAs are further names the same image is pushed under (AgnhostPrev).
	AlsoAs []Image
}

// Build builds agnhost, glibc-dns-testing, nginx, busybox, kitten, nautilus,
// nonewprivs, regression-issue-74839, distroless-iptables, sample-apiserver and etcd
// (see the package documentation), or opts.Only of them, for this machine's platform
// into opts.OutDir. It fails naming every Options field those images need and lack,
// before it builds anything, and the Debian package of any program missing here.
func Build(ctx context.Context, opts Options) ([]Built, error) {
	// Each image with the Options fields it is built from: Options.Only's images need
	// theirs alone.
	type field struct{ name, value string }
	agnhost, files := field{"AgnhostBinary", opts.AgnhostBinary}, field{"ImageFiles", opts.ImageFiles}
	type imageSpec struct {
		img    Image
		needs  []field
		spec   func(context.Context, Options) (images.Spec, error)
		alsoAs []Image
	}
	// program is an image of one binary (programSpec) at at, from the Options field f.
	program := func(img Image, f field, at string) imageSpec {
		return imageSpec{img, []field{f}, programSpec(at, f.value), nil}
	}
	specs := []imageSpec{
		{Agnhost, []field{agnhost, {"CorednsBinary", opts.CorednsBinary}}, agnhostSpec, []Image{AgnhostPrev}},
		{GlibcDNSTesting, nil, glibcDNSTestingSpec, nil},
		{Nginx, nil, nginxSpec, nil},
		{BusyBox, []field{{"BusyboxBinary", opts.BusyboxBinary}}, busyboxSpec, nil},
		{Kitten, []field{agnhost, files}, pictureSpec("kitten"), nil},
		{Nautilus, []field{agnhost, files}, pictureSpec("nautilus"), nil},
		{Nonewprivs, []field{{"NonewprivsBinary", opts.NonewprivsBinary}}, nonewprivsSpec, nil},
		program(RegressionIssue74839, field{"RegressionIssue74839Binary", opts.RegressionIssue74839Binary}, "/regression-issue-74839"),
		{DistrolessIptables, nil, distrolessIptablesSpec, nil},
		program(SampleAPIServer, field{"SampleAPIServerBinary", opts.SampleAPIServerBinary}, "/sample-apiserver"),
		program(Etcd, field{"EtcdBinary", opts.EtcdBinary}, "/usr/local/bin/etcd"),
	}
	for _, img := range opts.Only {
		if !slices.ContainsFunc(specs, func(s imageSpec) bool { return s.img == img }) {
			return nil, fmt.Errorf("e2e images: Options.Only names %s, which Build does not build", img.Ref())
		}
	}
	specs = slices.DeleteFunc(specs, func(s imageSpec) bool {
		return opts.Only != nil && !slices.Contains(opts.Only, s.img)
	})
	var missing []string
	if opts.OutDir == "" {
		missing = append(missing, "OutDir")
	}
	for _, s := range specs {
		for _, f := range s.needs {
			if f.value == "" && !slices.Contains(missing, f.name) {
				missing = append(missing, f.name)
			}
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("e2e images: Options need %s", strings.Join(missing, ", "))
	}
	platform, err := images.HostPlatform()
	if err != nil {
		return nil, fmt.Errorf("e2e images: %w", err)
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("e2e images: %w", err)
	}
	var built []Built
	for _, s := range specs {
		spec, err := s.spec(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("e2e image %s: %w", s.img.Name, err)
		}
		spec.Source = opts.Source
		spec.Platform = platform
		if spec.Title == "" {
			spec.Title = s.img.Name + " for the Kubernetes e2e suite, built by nephele"
		}
		img, err := images.Image(spec)
		if err != nil {
			return nil, fmt.Errorf("e2e image %s: %w", s.img.Name, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return nil, fmt.Errorf("e2e image %s: %w", s.img.Name, err)
		}
		archive := filepath.Join(opts.OutDir, s.img.Name+".tar")
		if err := images.WriteArchive(archive, s.img.Ref(), img); err != nil {
			return nil, err
		}
		built = append(built, Built{Image: s.img, Archive: archive, Digest: digest, AlsoAs: s.alsoAs})
	}
	return built, nil
}

// dedupe joins lists of files, keeping the first of each path: two programs' library
// closures share libc.
func dedupe(lists ...[]images.File) []images.File {
	seen := map[string]bool{}
	var out []images.File
	for _, l := range lists {
		for _, f := range l {
			if !seen[f.Path] {
				seen[f.Path] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// coreutils are the small programs the suite's shell scripts call, in /usr/bin.
var coreutils = []string{"cat", "chmod", "cp", "cut", "date", "env", "head", "id", "ls", "mkdir", "mv",
	"printf", "rm", "seq", "sleep", "sort", "tail", "tee", "timeout", "touch", "tr", "uniq", "wc"}

// shellTools are a shell and the programs scripts expect beside it.
func shellTools() []images.HostTool {
	tools := []images.HostTool{
		{Path: "/bin/sh", Name: "dash", Package: "dash"},
		{Path: "/usr/bin/grep", Name: "grep", Package: "grep"},
		{Path: "/usr/bin/sed", Name: "sed", Package: "sed"},
	}
	for _, c := range coreutils {
		tools = append(tools, images.HostTool{Path: "/usr/bin/" + c, Name: c, Package: "coreutils"})
	}
	return tools
}

// basics are the files every test image has: the base (CA certificates, passwd,
// group), a world-writable /tmp, and an nsswitch.conf that makes glibc's getent read
// /etc/hosts (kubelet's) before asking DNS, as Debian's does.
func basics() ([]images.File, error) {
	base, err := images.BaseFiles()
	if err != nil {
		return nil, err
	}
	return append(base,
		images.File{Path: "/tmp", Dir: true, Mode: 0o1777},
		images.File{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte(
			"passwd: files\ngroup: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n")},
	), nil
}

// wgetrc makes GNU wget try once, as busybox's wget in upstream's Alpine-based agnhost
// does. The suite checks that a target is not reachable with `wget -T 5` in a poll
// loop; with GNU wget's default of 20 tries, waiting up to 10 s between them, each such
// check took about four minutes instead of five seconds (the source ranges test ran 10
// minutes longer than upstream's).
const wgetrc = "# nephele's e2e agnhost image: one try, as busybox's wget in upstream's image.\ntries = 1\n"

// path is the PATH of the test images' shells.
const path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func agnhostSpec(ctx context.Context, opts Options) (images.Spec, error) {
	files, err := basics()
	if err != nil {
		return images.Spec{}, err
	}
	// Built like kubelet (cgo on), agnhost links the machine's libc, which the image
	// carries for the Debian programs anyway.
	agnhost, err := images.HostPrograms(ctx, images.HostFile{Path: "/agnhost", From: opts.AgnhostBinary},
		images.HostFile{Path: "/coredns", From: opts.CorednsBinary})
	if err != nil {
		return images.Spec{}, fmt.Errorf("%w (make e2e-bins and make tools build them)", err)
	}
	// Upstream's agnhost is Alpine's: busybox answers every common command tests run in
	// it (dd in "should be rejected for evicted pods", od, md5sum...).
	tools, err := withBusybox(ctx, append(shellTools(),
		images.HostTool{Path: "/bin/bash", Name: "bash", Package: "bash"},
		images.HostTool{Path: "/usr/bin/nc", Name: "nc.openbsd", Package: "netcat-openbsd"},
		images.HostTool{Path: "/usr/bin/curl", Name: "curl", Package: "curl"},
		images.HostTool{Path: "/usr/bin/wget", Name: "wget", Package: "wget"},
		images.HostTool{Path: "/usr/bin/dig", Name: "dig", Package: "bind9-dnsutils"},
		images.HostTool{Path: "/usr/bin/nslookup", Name: "nslookup", Package: "bind9-dnsutils"},
		images.HostTool{Path: "/usr/bin/host", Name: "host", Package: "bind9-dnsutils"},
		images.HostTool{Path: "/usr/bin/getent", Name: "getent", Package: "libc-bin"},
		images.HostTool{Path: "/usr/bin/hostname", Name: "hostname", Package: "hostname"},
		images.HostTool{Path: "/usr/sbin/ip", Name: "ip", Package: "iproute2"},
		images.HostTool{Path: "/usr/bin/ss", Name: "ss", Package: "iproute2"},
	))
	if err != nil {
		return images.Spec{}, err
	}
	porter, err := porterCertificate()
	if err != nil {
		return images.Spec{}, err
	}
	files = append(files, dedupe(tools, agnhost)...)
	files = append(files, porter...)
	files = append(files,
		images.File{Path: "/etc/wgetrc", Mode: 0o644, Data: []byte(wgetrc)},
		images.File{Path: "/agnhost-2", Link: "agnhost"},
		images.File{Path: "/uploads", Dir: true, Mode: 0o777},
	)
	return images.Spec{
		Files:        files,
		Entrypoint:   []string{"/agnhost"},
		Cmd:          []string{"pause"},
		Env:          []string{path},
		ExposedPorts: []string{"80/tcp", "8080/tcp", "8081/tcp", "9376/tcp", "5000/tcp"},
	}, nil
}

// pictureSpec returns the spec of upstream's kitten or nautilus image: agnhost (without
// the tools of the agnhost image: nothing runs in these but test-webserver), with
// test/images/<name>/html's picture and data.json at / and test-webserver, which serves
// /, as the command.
func pictureSpec(name string) func(context.Context, Options) (images.Spec, error) {
	return func(ctx context.Context, opts Options) (images.Spec, error) {
		spec, err := programSpec("/agnhost", opts.AgnhostBinary)(ctx, opts)
		if err != nil {
			return images.Spec{}, err
		}
		dir := filepath.Join(opts.ImageFiles, name, "html")
		for _, f := range []string{name + ".jpg", "data.json"} {
			data, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				return images.Spec{}, fmt.Errorf("%w (make e2e-bins copies it from k8s.io/kubernetes/test/images)", err)
			}
			spec.Files = append(spec.Files, images.File{Path: "/" + f, Mode: 0o644, Data: data})
		}
		spec.Cmd = []string{"test-webserver"}
		return spec, nil
	}
}

// nonewprivsSpec is upstream's nonewprivs image: nnp, setuid root, run by default.
// Run as a user with allowPrivilegeEscalation left on, it prints effective uid 0; with
// it off (no_new_privs), the user's own uid. Upstream's sets CMD nnp and no entrypoint;
// the tests give neither command nor arguments, so the two run alike.
func nonewprivsSpec(ctx context.Context, opts Options) (images.Spec, error) {
	const nnp = "/usr/local/bin/nnp"
	spec, err := programSpec(nnp, opts.NonewprivsBinary)(ctx, opts)
	if err != nil {
		return images.Spec{}, err
	}
	for i := range spec.Files {
		if spec.Files[i].Path == nnp {
			spec.Files[i].Mode = 0o4755
		}
	}
	return spec, nil
}

// programSpec returns the spec of an image that is one program of this machine, from
// (with its libraries), at at, the entrypoint: regression-issue-74839, sample-apiserver,
// etcd, nonewprivs and the pictures' agnhost, whose pods give their arguments or
// command.
func programSpec(at, from string) func(context.Context, Options) (images.Spec, error) {
	return func(ctx context.Context, _ Options) (images.Spec, error) {
		files, err := basics()
		if err != nil {
			return images.Spec{}, err
		}
		prog, err := images.HostPrograms(ctx, images.HostFile{Path: at, From: from})
		if err != nil {
			return images.Spec{}, fmt.Errorf("%w (make e2e-bins builds it)", err)
		}
		return images.Spec{Files: append(files, prog...), Entrypoint: []string{at}, Env: []string{path}}, nil
	}
}

// distrolessIptablesSpec is the distroless-iptables image: Debian's iptables (nft) and
// conntrack, with a shell and busybox's applets for what scripts call beside them
// (which, test, sleep), as the tests run it through /bin/sh.
func distrolessIptablesSpec(ctx context.Context, _ Options) (images.Spec, error) {
	files, err := basics()
	if err != nil {
		return images.Spec{}, err
	}
	tools, err := withBusybox(ctx, append(shellTools(),
		images.HostTool{Path: "/usr/sbin/iptables", Name: "iptables", Package: "iptables"},
		images.HostTool{Path: "/usr/sbin/ip6tables", Name: "ip6tables", Package: "iptables"},
		images.HostTool{Path: "/usr/sbin/conntrack", Name: "conntrack", Package: "conntrack"},
	))
	if err != nil {
		return images.Spec{}, err
	}
	return images.Spec{Files: dedupe(files, tools), Entrypoint: []string{"/bin/sh"}, Env: []string{path}}, nil
}

// porterCertificate returns /localhost.crt and /localhost.key, which agnhost porter
// serves its SERVE_TLS_PORT_* ports with (upstream's image adds its porter/ pair there):
// without them those ports never listen, and the apiserver's proxy to them answers 503
// ("Proxy version v1 should proxy through a service and a pod"). Nothing verifies the
// certificate (the apiserver's proxy to pods does not), so a pair made here serves as
// upstream's does: for 127.0.0.1, ::1 and localhost.
func porterCertificate() ([]images.File, error) {
	ca, err := pki.NewAuthority("agnhost porter CA", porterValidity)
	if err != nil {
		return nil, fmt.Errorf("agnhost porter's certificate: %w", err)
	}
	c, err := ca.Issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	})
	if err != nil {
		return nil, fmt.Errorf("agnhost porter's certificate: %w", err)
	}
	return []images.File{
		{Path: "/localhost.crt", Data: c.CertPEM, Mode: 0o644},
		{Path: "/localhost.key", Data: c.KeyPEM, Mode: 0o644},
	}, nil
}

// porterValidity outlasts any e2e run by far; a run builds its images anew.
const porterValidity = 10 * 365 * 24 * time.Hour

func glibcDNSTestingSpec(ctx context.Context, _ Options) (images.Spec, error) {
	files, err := basics()
	if err != nil {
		return images.Spec{}, err
	}
	tools, err := images.PackHostTools(ctx, append(shellTools(),
		images.HostTool{Path: "/usr/bin/dig", Name: "dig", Package: "bind9-dnsutils"},
		images.HostTool{Path: "/usr/bin/getent", Name: "getent", Package: "libc-bin"},
	))
	if err != nil {
		return images.Spec{}, err
	}
	tools = append(tools, usrMerged(tools)...)
	return images.Spec{Files: append(files, tools...), Entrypoint: []string{"/bin/sh"}, Env: []string{path}}, nil
}

// nginxConf runs nginx in the foreground as upstream's image does, serving
// /usr/share/nginx/html on port 80, its workers as the unprivileged user, its temporary
// files in /tmp (the image has no /var/lib/nginx), its logs on the container's output.
const nginxConf = `# nginx.conf of nephele's nginx test image.
user nonroot nonroot;
worker_processes 1;
pid /tmp/nginx.pid;
error_log stderr;
events { worker_connections 256; }
http {
    include /etc/nginx/mime.types;
    access_log /dev/stdout;
    client_body_temp_path /tmp/client_body;
    proxy_temp_path /tmp/proxy;
    fastcgi_temp_path /tmp/fastcgi;
    uwsgi_temp_path /tmp/uwsgi;
    scgi_temp_path /tmp/scgi;
    server {
        listen 80 default_server;
        root /usr/share/nginx/html;
        index index.html;
    }
}
`

func nginxSpec(ctx context.Context, _ Options) (images.Spec, error) {
	files, err := basics()
	if err != nil {
		return images.Spec{}, err
	}
	// Upstream's nginx image is Debian's, with a shell: the storage suite runs scripts in
	// it through /bin/sh ("should allow exec of files on the volume").
	tools, err := images.PackHostTools(ctx, append(shellTools(), images.HostTool{Path: "/usr/sbin/nginx", Name: "nginx", Package: "nginx-light"}))
	if err != nil {
		return images.Spec{}, err
	}
	mime, err := images.HostConfigFiles(images.HostFile{Path: "/etc/nginx/mime.types"})
	if err != nil {
		return images.Spec{}, fmt.Errorf("%w (Debian package nginx-common)", err)
	}
	files = append(files, tools...)
	files = append(files, usrMerged(tools)...)
	files = append(files, mime...)
	files = append(files,
		images.File{Path: "/etc/nginx/nginx.conf", Mode: 0o644, Data: []byte(nginxConf)},
		images.File{Path: "/usr/share/nginx/html/index.html", Mode: 0o644, Data: []byte("<!DOCTYPE html>\n<title>nginx</title>\n<p>nginx, from nephele's e2e images.</p>\n")},
		// nginx opens its compiled-in log path before it reads error_log.
		images.File{Path: "/var/log/nginx", Dir: true, Mode: 0o755},
	)
	return images.Spec{
		Files:        files,
		Entrypoint:   []string{"/usr/sbin/nginx", "-g", "daemon off;"},
		Env:          []string{path},
		ExposedPorts: []string{"80/tcp"},
	}, nil
}

func busyboxSpec(ctx context.Context, opts Options) (images.Spec, error) {
	files, err := basics()
	if err != nil {
		return images.Spec{}, err
	}
	// Upstream busybox, not Debian's busybox-static: Debian's ash drops environment
	// variables whose names are not identifiers (hack/build-busybox.sh says more).
	bin, err := images.HostPrograms(ctx, images.HostFile{Path: "/bin/busybox", From: opts.BusyboxBinary})
	if err != nil {
		return images.Spec{}, fmt.Errorf("%w (make e2e-bins builds it)", err)
	}
	applets, err := busyboxApplets(ctx, opts.BusyboxBinary)
	if err != nil {
		return images.Spec{}, err
	}
	files = append(files, bin...)
	files = append(files, appletLinks(files, append(applets, "sh"))...)
	return images.Spec{Files: files, Entrypoint: []string{"/bin/sh"}, Env: []string{path}}, nil
}

// withBusybox packs tools (Debian's programs of this machine) with this machine's
// busybox-static at /bin/busybox, links each program of /usr/bin and /usr/sbin in /bin
// and /sbin too (usrMerged), and links busybox's applets for every other command, as
// Alpine's busybox answers them in upstream's images: the Debian programs come first.
func withBusybox(ctx context.Context, tools []images.HostTool) ([]images.File, error) {
	files, err := images.PackHostTools(ctx, append(tools, images.HostTool{Path: "/bin/busybox", Name: "busybox", Package: "busybox-static"}))
	if err != nil {
		return nil, err
	}
	applets, err := busyboxApplets(ctx, "")
	if err != nil {
		return nil, err
	}
	files = append(files, usrMerged(files)...)
	return append(files, appletLinks(files, applets)...), nil
}

// usrMerged links /bin/<name> to each program in /usr/bin and /sbin/<name> to each in
// /usr/sbin, where files have none there, as Debian's merged /usr does: tests name
// programs by absolute paths in either (a preStop hook's /bin/sleep, a probe's
// /bin/false), and a missing one fails the hook or probe, not the test's intent.
func usrMerged(files []images.File) []images.File {
	have := make(map[string]bool, len(files))
	for _, f := range files {
		have[f.Path] = true
	}
	var links []images.File
	for _, f := range files {
		dir, name := filepath.Split(f.Path)
		var at string
		switch dir {
		case "/usr/bin/":
			at = "/bin/" + name
		case "/usr/sbin/":
			at = "/sbin/" + name
		default:
			continue
		}
		if !have[at] {
			have[at] = true
			links = append(links, images.File{Path: at, Link: "../usr" + at})
		}
	}
	return links
}

// appletLinks links /bin/<applet> to busybox for each applet no file of files provides
// already in a directory of the image's PATH.
func appletLinks(files []images.File, applets []string) []images.File {
	have := make(map[string]bool, len(files))
	for _, f := range files {
		if dir := filepath.Dir(f.Path); slices.Contains([]string{"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"}, dir) {
			have[filepath.Base(f.Path)] = true
		}
	}
	var links []images.File
	for _, a := range applets {
		if !have[a] {
			links = append(links, images.File{Path: "/bin/" + a, Link: "busybox"})
		}
	}
	return links
}

// busyboxApplets are the applets of the busybox at from (or, when from is empty, this
// machine's busybox-static), for links in /bin as in upstream's images (tests call
// hexdump, od, md5sum and others), but for sh (the image decides what its shell is),
// busybox itself and names that are not plain file names.
func busyboxApplets(ctx context.Context, from string) ([]string, error) {
	if from == "" {
		var err error
		if from, err = images.LookHostProgram("busybox", "busybox-static"); err != nil {
			return nil, err
		}
	}
	out, err := exec.CommandContext(ctx, from, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list the applets of %s: %w", from, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if a == "sh" || a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		applets = append(applets, a)
	}
	if len(applets) == 0 {
		return nil, fmt.Errorf("%s --list named no applets", from)
	}
	return applets, nil
}
