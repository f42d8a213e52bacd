package manager

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/go-logr/logr"
)

// Logging formats accepted by --logging-format.
const (
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// NewLogger returns a structured logger writing to w in format ("text" or "json").
// verbosity is -v: V(n) messages are written when n <= verbosity.
func NewLogger(w io.Writer, format string, verbosity int) (logr.Logger, error) {
	return NewLoggerWithOptions(LoggerOptions{Out: w, Format: format, Verbosity: verbosity})
}

// LoggerOptions are the logging flags a logger is built from.
type LoggerOptions struct {
	// Out receives every line, or with ErrOut set, the lines below error level.
	Out io.Writer
	// ErrOut, when set, receives the error lines (--log-*-split-stream).
	ErrOut io.Writer
	// Format is --logging-format: "text" (or "") or "json".
	Format string
	// Verbosity is -v.
	Verbosity int
	// VModule is --vmodule: pattern=N settings that raise the verbosity of the files
	// they match, as klog's.
	VModule string
}

// NewLoggerWithOptions returns a structured logger built from o.
func NewLoggerWithOptions(o LoggerOptions) (logr.Logger, error) {
	modules, err := parseVModule(o.VModule)
	if err != nil {
		return logr.Discard(), fmt.Errorf("invalid value for --vmodule: %q: %w", o.VModule, err)
	}
	// The handler lets through what any module may log; vmoduleHandler decides per file.
	most := o.Verbosity
	for _, m := range modules {
		most = max(most, m.level)
	}
	newHandler := func(w io.Writer) (slog.Handler, error) {
		opts := &slog.HandlerOptions{Level: slog.Level(-most)}
		switch o.Format {
		case LogFormatText, "":
			return slog.NewTextHandler(w, opts), nil
		case LogFormatJSON:
			return slog.NewJSONHandler(w, opts), nil
		}
		return nil, fmt.Errorf("invalid value for --logging-format: %q: must be %q or %q", o.Format, LogFormatText, LogFormatJSON)
	}
	h, err := newHandler(o.Out)
	if err != nil {
		return logr.Discard(), err
	}
	if o.ErrOut != nil {
		errs, err := newHandler(o.ErrOut)
		if err != nil {
			return logr.Discard(), err
		}
		h = splitHandler{info: h, errs: errs}
	}
	if len(modules) > 0 {
		h = &vmoduleHandler{next: h, verbosity: o.Verbosity, modules: modules, levels: &sync.Map{}}
	}
	return logr.FromSlogHandler(h), nil
}

// vmodule is one pattern=N of --vmodule.
type vmodule struct {
	pattern string
	level   int
}

// parseVModule parses klog's --vmodule syntax: comma-separated pattern=N, where pattern
// is a file name without ".go", or a glob of one; a pattern with a slash matches the
// file's path.
func parseVModule(s string) ([]vmodule, error) {
	var out []vmodule
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		pattern, level, ok := strings.Cut(part, "=")
		if !ok || pattern == "" {
			return nil, fmt.Errorf("%q: want pattern=N", part)
		}
		n, err := strconv.Atoi(level)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: the level must be a number, 0 or more", part)
		}
		if _, err := filepath.Match(pattern, ""); err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		out = append(out, vmodule{pattern: pattern, level: n})
	}
	return out, nil
}

// vmoduleHandler writes a record below the global verbosity only when it comes from a
// file a --vmodule pattern raises to its level. The first matching pattern decides,
// as klog's. The level of each call site is worked out once and kept (as klog does), so
// a V(n) call costs a map lookup, not a stack walk and pattern matches, every time.
type vmoduleHandler struct {
	next      slog.Handler
	verbosity int
	modules   []vmodule
	levels    *sync.Map // program counter -> the verbosity its file gets (int)
}

func (h *vmoduleHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *vmoduleHandler) Handle(ctx context.Context, r slog.Record) error {
	if int(-r.Level) <= h.verbosity {
		return h.next.Handle(ctx, r)
	}
	if r.PC == 0 {
		return nil
	}
	if int(-r.Level) <= h.levelAt(r.PC) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

// levelAt returns the verbosity --vmodule gives the file of the call site pc: that of the
// first pattern matching it, else the global one.
func (h *vmoduleHandler) levelAt(pc uintptr) int {
	if l, ok := h.levels.Load(pc); ok {
		return l.(int)
	}
	level := h.verbosity
	frame, _ := goruntime.CallersFrames([]uintptr{pc}).Next()
	file := strings.TrimSuffix(frame.File, ".go")
	for _, m := range h.modules {
		target := filepath.Base(file)
		if strings.Contains(m.pattern, "/") {
			target = file
		}
		if ok, _ := filepath.Match(m.pattern, target); ok {
			level = m.level
			break
		}
	}
	h.levels.Store(pc, level)
	return level
}

func (h *vmoduleHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &vmoduleHandler{next: h.next.WithAttrs(attrs), verbosity: h.verbosity, modules: h.modules, levels: h.levels}
}

func (h *vmoduleHandler) WithGroup(name string) slog.Handler {
	return &vmoduleHandler{next: h.next.WithGroup(name), verbosity: h.verbosity, modules: h.modules, levels: h.levels}
}

// splitHandler sends error records to errs and the rest to info (--log-*-split-stream).
type splitHandler struct{ info, errs slog.Handler }

func (h splitHandler) pick(l slog.Level) slog.Handler {
	if l >= slog.LevelError {
		return h.errs
	}
	return h.info
}

func (h splitHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.pick(l).Enabled(ctx, l)
}

func (h splitHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.pick(r.Level).Handle(ctx, r)
}

func (h splitHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return splitHandler{info: h.info.WithAttrs(attrs), errs: h.errs.WithAttrs(attrs)}
}

func (h splitHandler) WithGroup(name string) slog.Handler {
	return splitHandler{info: h.info.WithGroup(name), errs: h.errs.WithGroup(name)}
}
