package manager_test

import (
	"fmt"
	"io"
	"os"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
	"github.com/nephele-dev/nephele/controllers"
	"github.com/nephele-dev/nephele/manager"
)

// A provider's cloud-controller-manager binary is a registry holding its provider, the
// manager's command over it and nephele's four controllers, and Execute for the exit
// code. Here two bad flags show what an operator sees: one line per problem naming the
// flag and the fix, and exit code 1, before anything starts.
func ExampleNewCommand() {
	registry := cloud.NewRegistry()
	err := registry.Register("example", func(config io.Reader) (cloud.Provider, error) {
		return fakecloud.New(fakecloud.Options{Name: "example"})
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	cmd := manager.NewCommand("example-cloud-controller-manager", registry, controllers.Default())

	// main would call os.Exit(manager.Execute(cmd)) with the process's arguments.
	cmd.SetArgs([]string{"--cloud-provider=example", "--controllers=frobnicator", "--node-monitor-period=-5s"})
	cmd.SetErr(os.Stdout)
	fmt.Println("exit code", manager.Execute(cmd))
	// Output:
	// error: invalid value for --controllers: unknown controller "frobnicator": known controllers are cloud-node-controller, cloud-node-lifecycle-controller, service-lb-controller, node-route-controller
	// invalid value for --node-monitor-period: "-5s": must be a positive duration
	// exit code 1
}
