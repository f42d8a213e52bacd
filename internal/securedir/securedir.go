package securedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// UntrustedError says which component of a path another user could change, and how.
type UntrustedError struct {
	// Path is the directory checked.
	Path string
	// Component is the directory (or link) on Path's way that fails the rule.
	Component string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *UntrustedError) Error() string {
	return fmt.Sprintf("%s cannot be trusted: %s %s; use a directory only root (or you) can write, such as one under /var/lib or a fresh one under /tmp",
		e.Path, e.Component, e.Reason)
}

// Check reports whether dir, an existing directory, and every directory above it can be
// written only by root or the calling user: an *UntrustedError when not. dir itself must
// not be writable by group or others even with the sticky bit. Symbolic links on the way
// are followed, and each must be owned by root or the caller too.
func Check(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("check %s: %w", dir, err)
	}
	return check(abs, abs, os.Geteuid(), 0)
}

// maxLinks bounds the symbolic links followed, as the kernel's ELOOP does.
const maxLinks = 40

func check(orig, path string, euid, links int) error {
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(path), "/"), "/")
	cur := "/"
	if err := component(orig, cur, euid, false); err != nil {
		return err
	}
	for i, p := range parts {
		if p == "" {
			continue
		}
		next := filepath.Join(cur, p)
		fi, err := os.Lstat(next)
		if err != nil {
			return fmt.Errorf("check %s: %w", orig, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if err := owner(orig, next, fi, euid); err != nil {
				return err
			}
			if links++; links > maxLinks {
				return fmt.Errorf("check %s: too many symbolic links", orig)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return fmt.Errorf("check %s: %w", orig, err)
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(cur, target)
			}
			rest := filepath.Join(append([]string{target}, parts[i+1:]...)...)
			return check(orig, rest, euid, links)
		}
		if !fi.IsDir() {
			return fmt.Errorf("check %s: %s is not a directory", orig, next)
		}
		if err := component(orig, next, euid, i == len(parts)-1); err != nil {
			return err
		}
		cur = next
	}
	return nil
}

// component checks one directory of the path; last is the directory asked about.
func component(orig, dir string, euid int, last bool) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("check %s: %w", orig, err)
	}
	if err := owner(orig, dir, fi, euid); err != nil {
		return err
	}
	perm := fi.Mode().Perm()
	if perm&0o022 == 0 {
		return nil
	}
	if last {
		return &UntrustedError{Path: orig, Component: dir, Reason: fmt.Sprintf("is writable by group or others (mode %04o): chmod go-w it", perm)}
	}
	if fi.Mode()&fs.ModeSticky == 0 {
		return &UntrustedError{Path: orig, Component: dir, Reason: fmt.Sprintf("is writable by group or others without the sticky bit (mode %04o)", perm)}
	}
	return nil
}

// owner checks that fi (of path) belongs to root or to euid.
func owner(orig, path string, fi fs.FileInfo, euid int) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("securedir: file owners are not available on this system")
	}
	if st.Uid != 0 && int(st.Uid) != euid {
		return &UntrustedError{Path: orig, Component: path, Reason: fmt.Sprintf("is owned by uid %d, neither root nor you (uid %d)", st.Uid, euid)}
	}
	return nil
}
