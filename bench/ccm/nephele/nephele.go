package nephele

import (
	"context"
	"fmt"
	"io"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/manager"
	"github.com/nephele-dev/nephele/providers/local"
)

// Run runs what cmd/cloud-controller-manager runs, with args as its flags, until ctx
// is done; it is a ccm.Func.
func Run(ctx context.Context, args []string, stderr io.Writer) int {
	registry := cloud.NewRegistry()
	if err := local.Register(registry); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	cmd := manager.NewCommand("cloud-controller-manager", registry, controllers.Default())
	cmd.SetArgs(args)
	cmd.SetErr(stderr)
	cmd.SetContext(ctx)
	return manager.Execute(cmd)
}
