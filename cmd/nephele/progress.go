package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// stepWidth aligns the results of progress lines.
const stepWidth = 52

// progress prints one line per step: its name when it starts, then how it ended and how
// long it took, so a person sees at once which step is slow or stuck.
type progress struct {
	w   io.Writer
	now func() time.Time
}

func newProgress(w io.Writer) *progress { return &progress{w: w, now: time.Now} }

// Step runs fn under the name and prints the outcome. fn may return a short detail to
// show after the timing, such as what was reused.
func (p *progress) Step(ctx context.Context, name string, fn func(context.Context) (string, error)) error {
	fmt.Fprintf(p.w, "  %-*s", stepWidth, name+" ")
	start := p.now()
	detail, err := fn(ctx)
	took := p.now().Sub(start)
	switch {
	case err == nil:
		fmt.Fprintf(p.w, "ok   %5.1fs", took.Seconds())
		if detail != "" {
			fmt.Fprintf(p.w, "  %s", detail)
		}
		fmt.Fprintln(p.w)
		return nil
	case errors.Is(ctx.Err(), context.Canceled):
		// Ctrl-C, not a failure of the step; a timeout is a failure.
		fmt.Fprintf(p.w, "interrupted %5.1fs\n", took.Seconds())
	default:
		fmt.Fprintf(p.w, "FAILED %5.1fs\n", took.Seconds())
	}
	return fmt.Errorf("%s: %w", name, err)
}
