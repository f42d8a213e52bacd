package poll

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

func TestWithinFailsNamingWhatAndTheLastAnswer(t *testing.T) {
	r := &recorder{TB: t}
	Within(r, 20*time.Millisecond, "the node to be initialized", func() error { return errors.New("still tainted") })
	if !strings.HasPrefix(r.fatal, "waiting for the node to be initialized: still not after ") || !strings.HasSuffix(r.fatal, ": still tainted") {
		t.Errorf("Fatalf(%q), want what was waited for and the last answer", r.fatal)
	}
	r.fatal = ""
	Eventually(r, "nothing", func() error { return nil })
	EventuallyContext(r, "nothing", func(context.Context) error { return nil })
	WithinContext(r, time.Second, "nothing", func(context.Context) error { return nil })
	if r.fatal != "" {
		t.Errorf("a condition that holds failed the test: %s", r.fatal)
	}
}
