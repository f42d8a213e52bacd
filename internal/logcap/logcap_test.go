package logcap_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nephele-dev/nephele/internal/logcap"
	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

// TestTrim: a log under its cap is left alone; one over it moves to .1 (replacing the
// one before) and starts again with a note, and a writer holding it with O_APPEND
// writes at the new end, leaving no hole.
func TestTrim(t *testing.T) {
	path := filepath.Join(t.TempDir(), "boot.log")
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if trimmed, err := logcap.Trim(path+".missing", 10); trimmed || err != nil {
		t.Errorf("Trim of a missing log = %v, %v", trimmed, err)
	}
	a, b, c := strings.Repeat("a", 200), strings.Repeat("b", 200), strings.Repeat("c", 300)
	tests := []struct {
		write   string
		trimmed bool
		log     string // what the log holds after, but for the note
		old     string // what .1 holds after, but for the note
	}{
		{a, false, a, ""},
		{b, true, "", a + b},
		{"q", false, "q", a + b},
		{c, true, "", "q" + c},
	}
	for i, tt := range tests {
		if _, err := w.WriteString(tt.write); err != nil {
			t.Fatal(err)
		}
		trimmed, err := logcap.Trim(path, 300)
		if err != nil || trimmed != tt.trimmed {
			t.Fatalf("step %d: Trim = %v, %v; want %v", i, trimmed, err, tt.trimmed)
		}
		log, _ := os.ReadFile(path)
		old, _ := os.ReadFile(path + ".1")
		if got := stripNote(string(log)); got != tt.log {
			t.Errorf("step %d: the log holds %q, want %q", i, log, tt.log)
		}
		if got := stripNote(string(old)); got != tt.old {
			t.Errorf("step %d: the old log holds %q, want %q", i, old, tt.old)
		}
		if tt.trimmed && !strings.Contains(string(log), "passed 300 bytes") {
			t.Errorf("step %d: the trimmed log does not say it was: %q", i, log)
		}
	}
}

// stripNote removes Trim's note line.
func stripNote(s string) string {
	if strings.HasPrefix(s, "--- ") {
		_, rest, _ := strings.Cut(s, "\n")
		return rest
	}
	return s
}

// TestKeep trims a log that grows while it runs, until its context ends.
func TestKeep(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.log")
	if err := os.WriteFile(path, []byte(strings.Repeat("x", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var reported []string
	wg.Go(func() {
		logcap.Keep(ctx, 10*time.Millisecond, 500, func() []string { return []string{path, filepath.Join(path, "not-a-dir")} },
			func(p string, err error) {
				mu.Lock()
				reported = append(reported, fmt.Sprint(p, err))
				mu.Unlock()
			})
	})
	poll.Eventually(t, "the log to be trimmed", func() error {
		log, err := os.ReadFile(path)
		if err != nil || !strings.HasPrefix(string(log), "--- ") {
			return fmt.Errorf("log: %q, %v", log, err)
		}
		old, err := os.ReadFile(path + ".1")
		if err != nil || len(old) != 1000 {
			return fmt.Errorf("old log: %d bytes, %v", len(old), err)
		}
		return nil
	})
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(reported) == 0 || !strings.Contains(reported[0], "not-a-dir") {
		t.Errorf("reported %q, want the log that cannot be read", reported)
	}
}
