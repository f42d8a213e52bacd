package controlplane

import (
	"context"

	"github.com/nephele-dev/nephele/internal/testenv"
)

type (
	// Options selects the components started beside etcd and kube-apiserver.
	Options = testenv.Options
	// Env is a running control plane.
	Env = testenv.Env
	// Process is one control plane binary running in its own process group.
	Process = testenv.Process
	// StartError reports a Start that failed after processes were started.
	StartError = testenv.StartError
	// MissingBinaryError reports a binary missing from the bin directory.
	MissingBinaryError = testenv.MissingBinaryError
)

// BinDirEnv names the environment variable that overrides where the binaries are found.
const BinDirEnv = testenv.BinDirEnv

// Start starts etcd and kube-apiserver, then the components opts asks for. It returns
// once the apiserver is ready; the processes run until Env.Stop.
func Start(ctx context.Context, opts Options) (*Env, error) {
	return testenv.Start(ctx, opts)
}

// BinDir returns the directory the control plane binaries are taken from.
func BinDir() (string, error) {
	return testenv.BinDir()
}
