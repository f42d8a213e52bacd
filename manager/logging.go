package manager

import (
	"fmt"
	"io"
	"log/slog"

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
	opts := &slog.HandlerOptions{Level: slog.Level(-verbosity)}
	var h slog.Handler
	switch format {
	case LogFormatText, "":
		h = slog.NewTextHandler(w, opts)
	case LogFormatJSON:
		h = slog.NewJSONHandler(w, opts)
	default:
		return logr.Discard(), fmt.Errorf("invalid value for --logging-format: %q: must be %q or %q", format, LogFormatText, LogFormatJSON)
	}
	return logr.FromSlogHandler(h), nil
}
