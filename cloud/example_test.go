package cloud_test

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/cloud/fakecloud"
)

// A binary's main builds a registry and registers each provider compiled into it under
// the name --cloud-provider selects. The factory builds the provider from its cloud
// config, the file --cloud-config names (nil without the flag), and its errors reach
// the operator with the provider's name.
func ExampleRegistry() {
	registry := cloud.NewRegistry()
	factory := func(config io.Reader) (cloud.Provider, error) {
		if config == nil {
			return nil, errors.New("no cloud config: give --cloud-config")
		}
		// A real provider parses config strictly here.
		return fakecloud.New(fakecloud.Options{Name: "example"})
	}
	if err := registry.Register("example", factory); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(registry.Names())

	p, err := registry.New("example", strings.NewReader("region: ex-1\n"))
	fmt.Println(p.ProviderName(), err)
	_, err = registry.New("example", nil)
	fmt.Println(err)
	_, err = registry.New("exmaple", nil)
	fmt.Println(err)
	fmt.Println(registry.Register("example", factory))
	// Output:
	// [example]
	// example <nil>
	// creating cloud provider "example": no cloud config: give --cloud-config
	// unknown cloud provider "exmaple": known providers are example
	// registering cloud provider "example": a provider with that name is already registered
}
