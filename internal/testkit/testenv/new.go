package testenv

import (
	"strings"
	"testing"

	"github.com/nephele-dev/nephele/controlplane"
)

// New starts a control plane for one test (see controlplane.Start) and stops it when the
// test ends. If the test failed, the control plane's directory is kept, its path logged
// together with the end of every process's log; otherwise it is removed. A control plane
// that cannot start fails the test: integration tests never skip.
func New(t testing.TB, opts controlplane.Options) *controlplane.Env {
	t.Helper()
	env, err := controlplane.Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			if err := env.Stop(); err != nil {
				t.Errorf("testenv: stop: %v", err)
			}
			return
		}
		err := env.StopKeepingLogs()
		logKept(t, env)
		if err != nil {
			t.Errorf("testenv: stop: %v", err)
		}
	})
	return env
}

// logKept logs where a stopped control plane's directory was kept and how each of its
// processes' logs ends, so a failed test's output shows why.
func logKept(t testing.TB, env *controlplane.Env) {
	t.Helper()
	for _, p := range env.Processes() {
		t.Logf("testenv: end of %s:\n\t%s", p.LogPath(), strings.ReplaceAll(p.LogTail(30), "\n", "\n\t"))
	}
	t.Logf("testenv: control plane directory kept: %s", env.Dir)
}
