package kubenode

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/go-logr/logr"
)

// bootConfigEnv, when set, makes the test binary the node runtime booting the node
// configuration it names: what `nephele node boot --config` does, started by a test
// inside a host.
const bootConfigEnv = "NEPHELE_KUBENODE_TEST_BOOT_CONFIG"

func TestMain(m *testing.M) {
	if path := os.Getenv(bootConfigEnv); path != "" {
		os.Exit(bootMain(path))
	}
	os.Exit(m.Run())
}

func bootMain(path string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg, err := LoadConfig(path)
	if err == nil {
		var n *Node
		if n, err = cfg.Complete(os.Getenv, LookPath); err == nil {
			log := logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.Level(-1)}))
			err = Boot(ctx, n, log)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "node boot:", err)
		return 1
	}
	return 0
}
