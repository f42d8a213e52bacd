// Command ccm-nephele is the benchmarks' controller process for the nephele cloud-controller-manager:
//
//	ccm-nephele --impl=nephele --stats-addr-file=FILE -- <cloud-controller-manager flags>
//
// It carries that manager alone, so its memory is that manager's. See package ccm.
package main

import (
	"os"

	"github.com/nephele-dev/nephele/bench/ccm"
	"github.com/nephele-dev/nephele/bench/ccm/nephele"
)

func main() {
	os.Exit(ccm.Main(os.Args[1:], os.Stderr, map[ccm.Impl]ccm.Func{ccm.Nephele: nephele.Run}))
}
