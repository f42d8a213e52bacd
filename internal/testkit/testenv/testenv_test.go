package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nephele-dev/nephele/controlplane"
	"github.com/nephele-dev/nephele/internal/testkit/testenv"
)

// shared is the control plane of this package's tests, as other packages use theirs.
var shared = testenv.Shared{}

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// TestScope checks that a scope sees and deletes only its own Nodes on a shared control
// plane.
func TestScope(t *testing.T) {
	const key = "nephele.dev/scope-test"
	c := shared.Env(t).Client
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "scope-other", Labels: map[string]string{key: "someone-else"}}}
	if _, err := c.CoreV1().Nodes().Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), other.Name, metav1.DeleteOptions{}) })
	var mine string
	t.Run("scoped", func(t *testing.T) {
		s := testenv.NewScope(t, c, key)
		// Registered after NewScope, so it runs before the scope's cleanup.
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		mine = s.ID + "-a"
		if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: mine, Labels: s.Labels()}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		lister := s.Informers.Core().V1().Nodes().Lister()
		s.Informers.Start(ctx.Done())
		s.Informers.WaitForCacheSync(ctx.Done())
		nodes, err := lister.List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes) != 1 || nodes[0].Name != mine {
			t.Errorf("the scope's informers see %d nodes, want only %s", len(nodes), mine)
		}
	})
	if _, err := c.CoreV1().Nodes().Get(t.Context(), mine, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the scope's node %s after its test: %v, want NotFound", mine, err)
	}
	if _, err := c.CoreV1().Nodes().Get(t.Context(), other.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("another test's node after the scope's cleanup: %v", err)
	}
}

// failedTB is a test that has failed, recording its cleanups and logs instead of running
// and printing them.
type failedTB struct {
	testing.TB
	cleanups []func()
	logs     []string
}

func (f *failedTB) Failed() bool      { return true }
func (f *failedTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *failedTB) Logf(format string, args ...any) {
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

// TestNewKeepsLogsOnFailure checks what a failed test leaves: every process stopped, the
// control plane's directory kept, and where it is and how each log ends in the test output.
func TestNewKeepsLogsOnFailure(t *testing.T) {
	tb := &failedTB{TB: t}
	env := testenv.New(tb, controlplane.Options{})
	t.Cleanup(func() { os.RemoveAll(env.Dir) })
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}

	if _, err := os.Stat(filepath.Join(env.Dir, "kube-apiserver.log")); err != nil {
		t.Errorf("apiserver log not kept: %v", err)
	}
	out := strings.Join(tb.logs, "\n")
	for _, want := range []string{"directory kept: " + env.Dir, "end of " + filepath.Join(env.Dir, "etcd.log")} {
		if !strings.Contains(out, want) {
			t.Errorf("test output does not contain %q:\n%s", want, out)
		}
	}
	for _, p := range env.Processes() {
		select {
		case <-p.Done():
		default:
			t.Errorf("%s (pid %d) still runs after cleanup", p.Name(), p.Pid())
		}
		if err := syscall.Kill(-p.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group of %s (pid %d) still exists after cleanup: %v", p.Name(), p.Pid(), err)
		}
	}
	if err := env.Stop(); err != nil {
		t.Errorf("Stop() after cleanup: %v", err)
	}
}
