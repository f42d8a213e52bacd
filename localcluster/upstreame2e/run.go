package upstreame2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nephele-dev/nephele/images"
	"github.com/nephele-dev/nephele/images/e2eimages"
	"github.com/nephele-dev/nephele/localcluster"
	"github.com/nephele-dev/nephele/providers/local"
)

// Binaries are what make e2e-bins builds into the bin directory: the programs, and
// e2e-image-files, the directory of the test images' other files.
var Binaries = []string{"e2e.test", "ginkgo", "agnhost", "nonewprivs", "regression-issue-74839", "sample-apiserver", "busybox", "e2e-image-files"}

// Env is a cluster ready for the suite: Prepare makes one.
type Env struct {
	c      *localcluster.Cluster
	binDir string
	dir    string
	// RepoList is the KUBE_TEST_REPO_LIST file.
	RepoList string
	// CloudConfig is the local cloud's cloud config, for the suite's nephele provider.
	CloudConfig string
	// StorageDriver is the CSI driver's definition for the external storage suite
	// (StorageTestDriver), written when the cluster runs the driver.
	StorageDriver string
}

// Prepare builds the e2e test images from binDir/agnhost and this machine's programs
// into dir (only those named, when any are: e2eimages.Options.Only), pushes them and
// upstream's name of the pause image into the cluster's registry, and writes the repo
// list and a cloud config into dir. It fails naming what is missing: a binary of make
// e2e-bins, a Debian package.
func Prepare(ctx context.Context, c *localcluster.Cluster, binDir, dir string, only ...e2eimages.Image) (*Env, error) {
	var missing []string
	for _, b := range append(Binaries, "kubectl") {
		if st, err := os.Stat(filepath.Join(binDir, b)); err != nil || st.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("upstream e2e: %s not in %s: run make e2e-bins", strings.Join(missing, ", "), binDir)
	}
	if c.Registry == nil {
		return nil, errors.New("upstream e2e: the cluster has no registry (real nodes only)")
	}
	imgDir := filepath.Join(dir, "images")
	built, err := e2eimages.Build(ctx, e2eimages.Options{
		AgnhostBinary:              filepath.Join(binDir, "agnhost"),
		NonewprivsBinary:           filepath.Join(binDir, "nonewprivs"),
		RegressionIssue74839Binary: filepath.Join(binDir, "regression-issue-74839"),
		SampleAPIServerBinary:      filepath.Join(binDir, "sample-apiserver"),
		EtcdBinary:                 filepath.Join(binDir, "etcd"),
		BusyboxBinary:              filepath.Join(binDir, "busybox"),
		Only:                       only,
		CorednsBinary:              filepath.Join(binDir, "coredns"),
		ImageFiles:                 filepath.Join(binDir, "e2e-image-files"),
		OutDir:                     imgDir,
		Source:                     images.Source{Version: images.DefaultVersion},
	})
	if err != nil {
		return nil, err
	}
	for _, b := range built {
		if _, err := c.Registry.PushArchive(ctx, b.Archive, ""); err != nil {
			return nil, fmt.Errorf("upstream e2e: %w", err)
		}
		for _, alias := range b.AlsoAs {
			if _, err := c.Registry.PushArchive(ctx, b.Archive, alias.Ref()); err != nil {
				return nil, fmt.Errorf("upstream e2e: %w", err)
			}
		}
	}
	if _, err := c.Registry.PushArchive(ctx, filepath.Join(localcluster.ImageDir(c.Config().BinDir), images.Pause.Name+".tar"), e2eimages.Pause.Ref()); err != nil {
		return nil, fmt.Errorf("upstream e2e: %w", err)
	}
	e := &Env{c: c, binDir: binDir, dir: dir, RepoList: filepath.Join(dir, "repo-list.yaml"), CloudConfig: filepath.Join(dir, "cloud-config.yaml")}
	list, err := e2eimages.RepoList()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(e.RepoList, list, 0o644); err != nil {
		return nil, fmt.Errorf("upstream e2e: %w", err)
	}
	cloudConfig, err := local.File{Endpoint: c.CloudURL, TokenFile: c.CloudTokenFile, CAFile: c.CloudCAFile}.Marshal("nephele up --e2e, for the e2e suite's nephele provider")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(e.CloudConfig, cloudConfig, 0o600); err != nil {
		return nil, fmt.Errorf("upstream e2e: %w", err)
	}
	if c.Config().Volumes {
		o, err := c.CSIManifests()
		if err != nil {
			return nil, fmt.Errorf("upstream e2e: %w", err)
		}
		def, err := StorageTestDriver(o)
		if err != nil {
			return nil, err
		}
		e.StorageDriver = filepath.Join(dir, "storage-test-driver.yaml")
		if err := os.WriteFile(e.StorageDriver, def, 0o644); err != nil {
			return nil, fmt.Errorf("upstream e2e: %w", err)
		}
	}
	return e, nil
}

// Run runs suite with the ginkgo CLI, its output to out, JUnit into
// reportDir/<suite name>, and returns its report. A suite whose tests fail is not an
// error: the report says which failed. An error means the suite could not run or its
// report could not be read.
func (e *Env) Run(ctx context.Context, suite Suite, reportDir string, out io.Writer) (*Report, error) {
	if suite.Storage && e.StorageDriver == "" {
		return nil, fmt.Errorf("suite %s: the cluster runs no CSI driver (localcluster.Config.Volumes, nephele up --volumes)", suite.Name)
	}
	dir := filepath.Join(reportDir, suite.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	parallel := max(suite.Parallel, 1)
	args := []string{
		"--nodes=" + strconv.Itoa(parallel),
		"--focus=" + suite.Focus,
		"--timeout=" + suite.Timeout.String(),
		// A spec that fails is reported with its output; the rest stay quiet.
		"--no-color", "--silence-skips",
	}
	if suite.Skip != "" {
		args = append(args, "--skip="+suite.Skip)
	}
	args = append(args, filepath.Join(e.binDir, "e2e.test"), "--",
		"--provider="+suite.Provider,
		"--kubeconfig="+e.c.Env.Kubeconfig,
		"--kubectl-path="+e.c.Kubectl,
		"--report-dir="+dir,
		"--kube-test-repo-list="+e.RepoList,
		"--nephele-cloud-config="+e.CloudConfig,
		"--dns-domain="+localcluster.ClusterDomain,
		// The tests that need several nodes skip themselves below --num-nodes, whose
		// default (-1) says "unknown": "Requires at least 2 nodes (not -1)".
		"--num-nodes="+strconv.Itoa(e.c.Config().Nodes),
		"--disable-log-dump=true",
	)
	if suite.Storage {
		args = append(args, "--storage.testdriver="+e.StorageDriver)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(e.binDir, "ginkgo"), args...)
	cmd.Dir = dir
	// kubectl exec into the pods: the suite runs kubectl from its PATH too.
	cmd.Env = append(os.Environ(), "PATH="+e.binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+e.c.Env.Kubeconfig, "KUBE_TEST_REPO_LIST="+e.RepoList,
		// ginkgo compares its version with `go list -m` run beside e2e.test, which in a
		// bin/ inside nephele's tree answers for nephele's module, not the one e2e.test
		// and ginkgo were built from (the same version: make e2e-bins): a false warning.
		"GO111MODULE=off")
	log, err := os.Create(filepath.Join(dir, "ginkgo.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	var tail tailBuffer
	w := io.MultiWriter(log, &tail)
	if out != nil {
		w = io.MultiWriter(log, &tail, out)
	}
	cmd.Stdout, cmd.Stderr = w, w
	// Stop ginkgo gently when ctx ends: it then writes the report of what ran.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	start := time.Now()
	runErr := cmd.Run()
	report, err := ReadJUnit(filepath.Join(dir, "junit_01.xml"))
	if err != nil {
		return nil, fmt.Errorf("suite %s: %w (ginkgo: %v); the end of its output (%s):\n%s", suite.Name, err, runErr, log.Name(), tail.String())
	}
	report.Suite = suite
	report.Duration = time.Since(start)
	report.Log = log.Name()
	if runErr != nil && report.Failed() == 0 {
		// ginkgo failed without a failed test: a suite setup that failed, a timeout.
		return report, fmt.Errorf("suite %s: ginkgo: %w; the end of its output (%s):\n%s", suite.Name, runErr, log.Name(), tail.String())
	}
	return report, nil
}

// tailBuffer keeps the last tailBytes bytes written to it.
type tailBuffer struct{ b bytes.Buffer }

const tailBytes = 4000

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b.Write(p)
	if t.b.Len() > 2*tailBytes {
		keep := append([]byte(nil), t.b.Bytes()[t.b.Len()-tailBytes:]...)
		t.b.Reset()
		t.b.Write(keep)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	s := t.b.Bytes()
	if len(s) > tailBytes {
		s = s[len(s)-tailBytes:]
	}
	return string(s)
}

// Options are a whole run of RunSuites.
type Options struct {
	// BinDir holds e2e.test, ginkgo and agnhost (make e2e-bins) and kubectl.
	BinDir string
	// Dir receives the test images, the repo list and the cloud config.
	Dir string
	// ReportDir receives each suite's JUnit and log (ReportDir/<suite>/) and
	// summary.md, the tables of every suite.
	ReportDir string
	// Suites run in order; default Suites(DefaultParallel, DefaultTimeout, the cluster's
	// Volumes).
	Suites []Suite
	// Out receives ginkgo's output and a line per suite; nil discards it.
	Out io.Writer
}

// Defaults of a run: three ginkgo nodes (a failing load balancer test mostly waits, so
// more nodes than the machine's two cores pay off), and a bound of two hours on each
// suite.
const (
	DefaultParallel = 3
	DefaultTimeout  = 2 * time.Hour
)

// RunSuites prepares the cluster (Prepare), runs every suite, writes
// ReportDir/summary.md and returns the reports. It returns an error when a suite could
// not run, or when any test failed (naming how many): the reports are complete either
// way.
func RunSuites(ctx context.Context, c *localcluster.Cluster, opts Options) ([]*Report, error) {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if len(opts.Suites) == 0 {
		opts.Suites = Suites(DefaultParallel, DefaultTimeout, c.Config().Volumes)
	}
	if err := os.MkdirAll(opts.ReportDir, 0o755); err != nil {
		return nil, err
	}
	env, err := Prepare(ctx, c, opts.BinDir, opts.Dir)
	if err != nil {
		return nil, err
	}
	var reports []*Report
	var errs []error
	for _, s := range opts.Suites {
		fmt.Fprintf(opts.Out, "upstream e2e: suite %s (focus %s) on %d ginkgo nodes\n", s.Name, s.Focus, max(s.Parallel, 1))
		r, err := env.Run(ctx, s, opts.ReportDir, opts.Out)
		if r != nil {
			reports = append(reports, r)
			fmt.Fprintf(opts.Out, "upstream e2e: suite %s: %d passed, %d failed, %d skipped in %s\n",
				s.Name, r.Count(Passed), r.Count(Failed), r.Count(Skipped), r.Duration.Round(time.Second))
			if n := r.Failed(); n > 0 && err == nil {
				err = fmt.Errorf("suite %s: %d of %d tests failed (%s)", s.Name, n, len(r.Results), filepath.Join(opts.ReportDir, s.Name))
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	var summary bytes.Buffer
	if err := WriteSummary(&summary, reports...); err == nil {
		err = os.WriteFile(filepath.Join(opts.ReportDir, "summary.md"), summary.Bytes(), 0o644)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return reports, errors.Join(errs...)
}
