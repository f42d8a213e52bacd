// Command ccm-upstream is the benchmarks' controller process for the upstream cloud-controller-manager:
//
//	ccm-upstream --impl=upstream --stats-addr-file=FILE -- <cloud-controller-manager flags>
//
// It carries that manager alone, so its memory is that manager's. See package ccm.
package main

import (
	"os"

	"github.com/nephele-dev/nephele/bench/ccm"
	"github.com/nephele-dev/nephele/bench/ccm/upstream"
)

func main() {
	os.Exit(ccm.Main(os.Args[1:], os.Stderr, map[ccm.Impl]ccm.Func{ccm.Upstream: upstream.Run}))
}
