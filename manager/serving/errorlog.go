package serving

import (
	"log"
	"strings"

	"github.com/go-logr/logr"
)

// newServerErrorLog returns a *log.Logger for http.Server.ErrorLog that writes to
// logger. TLS handshake errors, which every TCP probe of the port causes, are logged
// only at high verbosity; everything else (a panic in a handler, say) is logged plainly.
func newServerErrorLog(logger logr.Logger) *log.Logger {
	return log.New(serverErrorWriter{logger}, "", 0)
}

type serverErrorWriter struct{ logger logr.Logger }

func (w serverErrorWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.Contains(msg, "TLS handshake error") {
		w.logger.V(4).Info("HTTP server", "message", msg)
	} else {
		w.logger.Info("HTTP server", "message", msg)
	}
	return len(p), nil
}
