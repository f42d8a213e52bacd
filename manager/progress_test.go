package manager

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestProgressCheck(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		setup   func(p *Progress, clock *time.Time)
		wantErr string // empty: healthy
	}{
		{"not started yet", func(p *Progress, c *time.Time) { *c = c.Add(time.Hour) }, ""},
		{"running, no pending func", func(p *Progress, c *time.Time) { p.Started(); *c = c.Add(time.Hour) }, ""},
		{"idle with an empty queue", func(p *Progress, c *time.Time) {
			p.Started()
			p.SetPending(func() int { return 0 })
			*c = c.Add(time.Hour)
		}, ""},
		{"work waiting, recent progress", func(p *Progress, c *time.Time) {
			p.Started()
			p.SetPending(func() int { return 3 })
			*c = c.Add(59 * time.Second)
		}, ""},
		{"work waiting, stalled", func(p *Progress, c *time.Time) {
			p.Started()
			p.SetPending(func() int { return 3 })
			*c = c.Add(61 * time.Second)
		}, "has 3 items waiting and has finished none for 1m1s"},
		{"stalled then progressed", func(p *Progress, c *time.Time) {
			p.Started()
			p.SetPending(func() int { return 3 })
			*c = c.Add(61 * time.Second)
			p.Progressed()
		}, ""},
		{"stopped cleanly", func(p *Progress, c *time.Time) { p.Started(); p.Stopped(nil) }, "controller c stopped"},
		{"stopped with error", func(p *Progress, c *time.Time) { p.Started(); p.Stopped(errors.New("boom")) }, "controller c stopped: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := start
			p := NewProgress("c", time.Minute)
			p.now = func() time.Time { return clock }
			p.last = clock
			tt.setup(p, &clock)
			err := p.Check()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Check() = %v, want healthy", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Check() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewLogger(t *testing.T) {
	tests := []struct {
		format    string
		verbosity int
		wantErr   bool
		want      string
		wantDebug bool
	}{
		{format: "text", want: "msg=hello"},
		{format: "json", want: `"msg":"hello"`},
		{format: "", want: "msg=hello"},
		{format: "json", verbosity: 2, want: `"msg":"hello"`, wantDebug: true},
		{format: "xml", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			var b strings.Builder
			log, err := NewLogger(&b, tt.format, tt.verbosity)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "--logging-format") {
					t.Fatalf("NewLogger(%q) error = %v, want one naming --logging-format", tt.format, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log.Info("hello")
			log.V(2).Info("debug-line")
			if !strings.Contains(b.String(), tt.want) {
				t.Errorf("output %q lacks %q", b.String(), tt.want)
			}
			if got := strings.Contains(b.String(), "debug-line"); got != tt.wantDebug {
				t.Errorf("V(2) written = %v at -v=%d, want %v", got, tt.verbosity, tt.wantDebug)
			}
		})
	}
}
