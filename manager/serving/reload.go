package serving

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"github.com/nephele-dev/nephele/internal/smallfile"

	"github.com/go-logr/logr"
)

// reloadCheckInterval is how often a reloading value looks at its files again: at most
// once a second, on the first use after that, so an idle server reads nothing and a busy
// one stats its files once a second at most.
const reloadCheckInterval = time.Second

// maxReloadFileSize bounds what a reloading value reads: certificates, keys and CA bundles
// are kilobytes; a file much larger is a mistake, not a certificate.
const maxReloadFileSize = 4 << 20

// reloading is a value parsed from files (a serving certificate and its key, a CA bundle)
// that is parsed again when their contents change, as upstream's dynamic certificate
// content is: a rotated certificate is served, and a rotated CA trusted, without a
// restart. A change that does not parse is logged and the last good value kept.
type reloading[T any] struct {
	what   string // for errors and logs: "--tls-cert-file and --tls-private-key-file"
	files  []string
	parse  func(contents [][]byte) (T, error)
	now    func() time.Time
	logger logr.Logger

	mu        sync.Mutex
	value     T
	contents  [][]byte
	lastCheck time.Time
	checking  bool   // a caller is reading the files
	lastErr   string // the last failure logged, so that it is logged once
}

// newReloading reads and parses files once; an error there is the caller's start error.
func newReloading[T any](what string, files []string, parse func([][]byte) (T, error), now func() time.Time, logger logr.Logger) (*reloading[T], error) {
	r := &reloading[T]{what: what, files: files, parse: parse, now: now, logger: logger.WithValues("what", what)}
	contents, err := r.read()
	if err != nil {
		return nil, err
	}
	v, err := parse(contents)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	r.value, r.contents, r.lastCheck = v, contents, now()
	return r, nil
}

func (r *reloading[T]) read() ([][]byte, error) {
	out := make([][]byte, len(r.files))
	for i, name := range r.files {
		b, err := smallfile.Read(name, maxReloadFileSize)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.what, err)
		}
		out[i] = b
	}
	return out, nil
}

// get returns the current value, after reading the files again when the last look is
// more than reloadCheckInterval old. One caller reads at a time, outside the lock: the
// others go on with the current value meanwhile, so a slow file never holds up a
// handshake it is not needed for.
func (r *reloading[T]) get() T {
	r.mu.Lock()
	now := r.now()
	if r.checking || now.Sub(r.lastCheck) < reloadCheckInterval {
		v := r.value
		r.mu.Unlock()
		return v
	}
	r.checking, r.lastCheck = true, now
	old := r.contents
	r.mu.Unlock()

	v, contents, changed, err := r.reread(old)

	r.mu.Lock()
	defer r.mu.Unlock()
	r.checking = false
	if msg := errString(err); msg != r.lastErr {
		// Log a failure once, not once a second while it lasts.
		r.lastErr = msg
		if err != nil {
			r.logger.Error(err, "Keeping the last good value until the files are good again", "files", r.files)
		}
	}
	if changed {
		r.value, r.contents = v, contents
		r.logger.Info("Reloaded", "files", r.files)
	}
	return r.value
}

// reread reads and, when they differ from old, parses the files. A file in the middle of
// being replaced (a Secret volume swaps a symlink) can be missing for a moment: the
// error keeps the last good value.
func (r *reloading[T]) reread(old [][]byte) (v T, contents [][]byte, changed bool, err error) {
	contents, err = r.read()
	if err != nil || sameContents(contents, old) {
		return v, nil, false, err
	}
	if v, err = r.parse(contents); err != nil {
		return v, nil, false, fmt.Errorf("%s: %w", r.what, err)
	}
	return v, contents, true, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func sameContents(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
