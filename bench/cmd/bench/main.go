// Command bench runs nephele's scale benchmarks side by side with the upstream
// controllers of k8s.io/cloud-provider and writes the report.
//
//	bench run    -scale small [-profile default|slow] [-rows nephele,upstream-tuned,upstream-defaults]
//	             [-out results] [-tag T -extra-flags "--kube-api-qps=100 ..."]
//	bench report -scale small [-profile default|slow] [-out results] [-tag T]
//	bench ccm    --impl=nephele|upstream --stats-addr-file=F -- <cloud-controller-manager flags>
//
// run writes results/<scale>/<row>.json per row and then the report; report rewrites
// results/<scale>/report.md and its charts from the JSON files there. run starts each
// row's controllers from ccm-nephele or ccm-upstream, which must be built into the same
// directory as bench (go build -o DIR ./cmd/...); ccm runs either in one binary, for
// trying things by hand (see package ccm).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nephele-dev/nephele/bench/ccm"
	"github.com/nephele-dev/nephele/bench/ccm/nephele"
	"github.com/nephele-dev/nephele/bench/ccm/upstream"
	"github.com/nephele-dev/nephele/bench/harness"
	"github.com/nephele-dev/nephele/bench/report"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  bench run    -scale tiny|small|large [-profile default|slow] [-rows r1,r2] [-out DIR] [-tag T -extra-flags "--flag=v ..."]
  bench report -scale tiny|small|large [-profile default|slow] [-out DIR] [-tag T]
  bench ccm    --impl=nephele|upstream --stats-addr-file=FILE -- <flags>`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "ccm":
		return ccm.Main(args[1:], stderr, map[ccm.Impl]ccm.Func{ccm.Nephele: nephele.Run, ccm.Upstream: upstream.Run})
	case "run", "report":
	default:
		fmt.Fprintln(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	scaleName := fs.String("scale", "small", "scale: tiny, small or large")
	rows := fs.String("rows", "", "comma-separated rows to run (default all): "+
		strings.Join([]string{harness.RowUpstreamDefaults, harness.RowUpstreamTuned, harness.RowNephele}, ","))
	out := fs.String("out", "results", "results directory; each scale writes to a directory of its own in it")
	extra := fs.String("extra-flags", "", "space-separated controller flags added to every row, for experiments (use with -tag)")
	profile := fs.String("profile", harness.DefaultProfile, "cloud profile: default (50ms calls, 50 calls/s) or slow (100ms, 25 calls/s); "+
		"a profile other than the default writes to <out>/<scale>-<profile>")
	tag := fs.String("tag", "", "suffix of the scale's results directory (<out>/<scale>-<tag>), to keep an experiment apart")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	// "bench run large" would otherwise stop parsing at "large" and run the default scale.
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "error: unexpected argument %q: the scale is -scale %s\n%s\n", fs.Arg(0), fs.Arg(0), usage)
		return 2
	}
	if args[0] == "report" && (*rows != "" || *extra != "") {
		fmt.Fprintln(stderr, "error: -rows and -extra-flags choose what bench run runs; bench report reports every row in the directory")
		return 2
	}
	scale, err := harness.ScaleNamed(*scaleName)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	if scale, err = scale.WithProfile(*profile); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	dir := filepath.Join(*out, scale.Name)
	if scale.Profile != "" {
		dir += "-" + scale.Profile
	}
	if *tag != "" {
		dir += "-" + *tag
	}
	if args[0] == "report" {
		return writeReport(dir, stdout, stderr)
	}

	cfg := harness.Config{
		Scale:  scale,
		Rows:   harness.Rows(),
		OutDir: dir,
		Logf: func(format string, a ...any) {
			fmt.Fprintf(stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
		},
	}
	if *rows != "" {
		if cfg.Rows, err = harness.RowsNamed(strings.Split(*rows, ",")); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 2
		}
	}
	if *extra != "" {
		if *tag == "" {
			fmt.Fprintln(stderr, "error: -extra-flags needs -tag, so that an experiment does not overwrite the scale's results")
			return 2
		}
		for i := range cfg.Rows {
			cfg.Rows[i].Flags = append(cfg.Rows[i].Flags, strings.Fields(*extra)...)
		}
	}
	// Each implementation runs from a binary of its own, built beside this one, so that
	// the memory measured is that implementation's alone.
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "error: finding this binary's directory:", err)
		return 1
	}
	binaries := map[ccm.Impl]string{}
	for _, impl := range []ccm.Impl{ccm.Nephele, ccm.Upstream} {
		p := filepath.Join(filepath.Dir(self), "ccm-"+string(impl))
		if _, err := os.Stat(p); err != nil {
			fmt.Fprintf(stderr, "error: the controller binary %s is missing: build bench/cmd/... into one directory (make bench does)\n", p)
			return 1
		}
		binaries[impl] = p
	}
	cfg.ControllerCommand = func(impl ccm.Impl, a []string) *exec.Cmd { return exec.Command(binaries[impl], a...) }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	_, runErr := harness.Run(ctx, cfg)
	cfg.Logf("scale %s finished in %s", scale.Name, time.Since(start).Round(time.Second))
	code := writeReport(dir, stdout, stderr)
	if runErr != nil {
		fmt.Fprintln(stderr, "error:", runErr)
		return 1
	}
	return code
}

func writeReport(dir string, stdout, stderr io.Writer) int {
	path, err := report.Write(dir)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	fmt.Fprintln(stdout, "report:", path)
	return 0
}
