package logcap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// Trim moves the log at path to path+".1" and empties it when it is larger than max,
// reporting whether it did. A missing log is not an error.
func Trim(path string, max int64) (bool, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("log %s: %w", path, err)
	}
	if fi.Size() <= max {
		return false, nil
	}
	if err := copyFile(path, path+".1"); err != nil {
		return false, fmt.Errorf("keeping log %s as %s.1: %w", path, path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return false, fmt.Errorf("truncating log %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Truncate(0); err != nil {
		return false, fmt.Errorf("truncating log %s: %w", path, err)
	}
	_, err = fmt.Fprintf(f, "--- %s: this log passed %d bytes; what came before is in %s.1\n",
		time.Now().UTC().Format(time.RFC3339), max, path)
	if err != nil {
		return true, fmt.Errorf("truncating log %s: %w", path, err)
	}
	return true, nil
}

// copyFile copies src over dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Keep trims the logs paths returns, each to max, every interval until ctx ends.
// Failures go to report (nil ignores them).
func Keep(ctx context.Context, interval time.Duration, max int64, paths func() []string, report func(path string, err error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, p := range paths() {
			if _, err := Trim(p, max); err != nil && report != nil {
				report(p, err)
			}
		}
	}
}
