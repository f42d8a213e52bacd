package kubenode

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
)

// TestRunReportsABootErrorOnce: the error a boot fails with is returned and written to
// the status file, but not logged as well, so that `nephele node boot`, which prints the
// returned error, shows it once.
func TestRunReportsABootErrorOnce(t *testing.T) {
	const failure = "containerd did not answer (a unique failure)"
	tests := []struct {
		name    string
		boot    func(ctx context.Context, cancel func()) error
		wantErr bool
	}{
		{"boot fails", func(context.Context, func()) error { return errors.New(failure) }, true},
		{"stopped while booting", func(ctx context.Context, cancel func()) error { cancel(); return ctx.Err() }, false},
		{"stopped after running", func(_ context.Context, cancel func()) error { cancel(); return nil }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var logged strings.Builder
			log := funcr.New(func(prefix, args string) {
				mu.Lock()
				defer mu.Unlock()
				logged.WriteString(prefix + " " + args + "\n")
			}, funcr.Options{Verbosity: 10})
			status := filepath.Join(t.TempDir(), "status.json")
			r := newRunner(&Node{Config: Config{NodeName: "n"}, Paths: Paths{Status: status}}, log)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			err := r.run(ctx, func(ctx context.Context) error { return tt.boot(ctx, cancel) })

			if tt.wantErr != (err != nil) || (err != nil && !strings.Contains(err.Error(), failure)) {
				t.Fatalf("run = %v, want the boot's error: %v", err, tt.wantErr)
			}
			mu.Lock()
			out := logged.String()
			mu.Unlock()
			if n := strings.Count(out, failure); n != 0 {
				t.Errorf("the log repeats the returned error %d times:\n%s", n, out)
			}
			if got := strings.Contains(out, "Boot failed"); got != tt.wantErr {
				t.Errorf("the log says the boot failed: %v, want %v:\n%s", got, tt.wantErr, out)
			}
			s, err := ReadStatus(status)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]string{true: failure, false: ""}[tt.wantErr]; s.Error != want || s.Phase != PhaseStopped {
				t.Errorf("status: error %q, phase %s; want %q, %s", s.Error, s.Phase, want, PhaseStopped)
			}
		})
	}
}
