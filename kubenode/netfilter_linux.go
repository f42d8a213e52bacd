package kubenode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// removeNodeChains removes the node's iptables chains (IPv4 and IPv6) from the host's
// network namespace, keeping the host's own rules: a host that is stopped and started
// again boots without the rules of pods that are gone.
// lookPath finds the iptables commands (on the components' PATH, which the runtime's own
// environment, set by whoever started it, may lack).
func removeNodeChains(ctx context.Context, lookPath func(string) (string, error)) error {
	var errs []error
	for _, family := range []string{"iptables", "ip6tables"} {
		savePath, err := lookPath(family + "-save")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		restorePath, err := lookPath(family + "-restore")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		save, err := exec.CommandContext(ctx, savePath).Output()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s-save: %w", family, err))
			continue
		}
		kept := withoutNodeChains(string(save))
		if kept == string(save) {
			continue
		}
		restore := exec.CommandContext(ctx, restorePath)
		restore.Stdin = strings.NewReader(kept)
		var stderr bytes.Buffer
		restore.Stderr = &stderr
		if err := restore.Run(); err != nil {
			errs = append(errs, fmt.Errorf("%s-restore: %w: %s", family, err, strings.TrimSpace(stderr.String())))
		}
	}
	return errors.Join(errs...)
}
