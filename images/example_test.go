package images_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nephele-dev/nephele/images"
)

// An image from a file, written as an archive `ctr images import` takes.
func Example() {
	img, err := images.Image(images.Spec{
		Files:      []images.File{{Path: "/hello", Data: []byte("#!/bin/sh\necho hello\n"), Mode: 0o755}},
		Entrypoint: []string{"/hello"},
		Source:     images.Source{URL: "https://github.com/nephele-dev/nephele", Revision: "0123abc", Version: "v0.1.0"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	dir, err := os.MkdirTemp("", "images-example-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer os.RemoveAll(dir)
	if err := images.WriteArchive(filepath.Join(dir, "hello.tar"), "nephele.local/hello:v0.1.0", img); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	cf, _ := img.ConfigFile()
	fmt.Println(cf.OS, cf.Architecture, cf.Config.Labels[images.LabelVersion])
	// Output: linux amd64 v0.1.0
}
