package ccm

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// Impl names a cloud-controller-manager implementation.
type Impl string

// The implementations.
const (
	Nephele  Impl = "nephele"
	Upstream Impl = "upstream"
)

// Func runs one implementation's manager with its flags until ctx is done and returns
// the process exit code.
type Func func(ctx context.Context, args []string, stderr io.Writer) int

// Main is the entry point of a controller process carrying the implementations in impls.
// args are
//
//	--impl=nephele|upstream --stats-addr-file=FILE -- <cloud-controller-manager flags>
//
// It serves the memory statistics, runs the manager until SIGTERM or SIGINT, and returns
// the process exit code, writing errors to stderr.
func Main(args []string, stderr io.Writer, impls map[Impl]Func) int {
	fs := flag.NewFlagSet("ccm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	impl := fs.String("impl", "", "the implementation: "+names(impls))
	statsFile := fs.String("stats-addr-file", "", "file to write the address of the memory statistics endpoint to")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *statsFile == "" {
		fmt.Fprintln(stderr, "error: --stats-addr-file is required")
		return 2
	}
	run, ok := impls[Impl(*impl)]
	if !ok {
		fmt.Fprintf(stderr, "error: --impl %q: this binary runs %s\n", *impl, names(impls))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	statsCtx, stopStats := context.WithCancel(ctx)
	stats, err := startStats(statsCtx, *statsFile)
	if err != nil {
		stopStats()
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	defer func() {
		stopStats()
		stats.wait()
	}()
	return run(ctx, fs.Args(), stderr)
}

func names(impls map[Impl]Func) string {
	var out []string
	for i := range impls {
		out = append(out, string(i))
	}
	sort.Strings(out)
	return strings.Join(out, " or ")
}

// Child is the entry point of a test binary that doubles as a cloud-controller-manager
// (proctest.Main): args are `<impl> <cloud-controller-manager flags>`. It runs that
// implementation until SIGTERM or SIGINT and returns the process exit code.
func Child(args []string, stderr io.Writer, impls map[Impl]Func) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "error: say which implementation to run: %s\n", names(impls))
		return 2
	}
	run, ok := impls[Impl(args[0])]
	if !ok {
		fmt.Fprintf(stderr, "error: %q: this binary runs %s\n", args[0], names(impls))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args[1:], stderr)
}
