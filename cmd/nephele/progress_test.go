package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeClock advances by step on every reading.
func fakeClock(step time.Duration) func() time.Time {
	now := time.Unix(0, 0)
	return func() time.Time {
		now = now.Add(step)
		return now
	}
}

func TestProgressStep(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		detail  string
		err     error
		want    string
		wantErr string
	}{
		{"ok", context.Background(), "", nil, "  start thing" + strings.Repeat(" ", stepWidth-len("start thing")) + "ok     1.5s\n", ""},
		{"ok with detail", context.Background(), "3 kept", nil, "ok     1.5s  3 kept\n", ""},
		{"failed", context.Background(), "", errors.New("boom"), "FAILED   1.5s\n", "start thing: boom"},
		{"interrupted", canceled, "", context.Canceled, "interrupted   1.5s\n", "start thing: context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			p := &progress{w: &out, now: fakeClock(1500 * time.Millisecond)}
			err := p.Step(tt.ctx, "start thing", func(context.Context) (string, error) { return tt.detail, tt.err })
			if !strings.HasSuffix(out.String(), tt.want) {
				t.Errorf("printed %q, want it to end with %q", out.String(), tt.want)
			}
			if !strings.HasPrefix(out.String(), "  start thing ") {
				t.Errorf("printed %q, want the step's name first", out.String())
			}
			if (err == nil) != (tt.wantErr == "") || err != nil && err.Error() != tt.wantErr {
				t.Errorf("step() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 routes", 1: "1 route", 2: "2 routes"} {
		if got := plural(n, "route"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}
