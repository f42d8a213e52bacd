package store

import (
	"fmt"
	"runtime/debug"
)

// CorruptError says the state file cannot be read: it is not a bbolt file, its pages do
// not decode, or it was cut short. Nothing was written to it. The message says what to
// do, since the cloud that wrote the file may have left hosts on the machine.
type CorruptError struct {
	// Path is the state file.
	Path string
	// Err is what bbolt or the store found.
	Err error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("state file %s is corrupt (%v): localcloud cannot read it. "+
		"If hosts of the cloud that wrote it may still be on this machine, run `localcloud --cleanup --state %s` first "+
		"(it removes what the host directory records, not the state file); then move the file aside and start again with an empty cloud",
		e.Path, e.Err, e.Path)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// corruptFileError is a fault the store itself finds in a file bbolt opened.
type corruptFileError struct{ msg string }

func (e *corruptFileError) Error() string { return e.msg }

// panicError is a panic inside bbolt, recovered by guard.
type panicError struct{ value any }

func (e *panicError) Error() string { return fmt.Sprintf("bbolt panicked: %v", e.value) }

// guard runs fn, turning a panic into a *panicError. bbolt panics on pages it cannot
// decode (an unknown page type, a freelist that is not one) rather than returning an
// error, and reads its file through a memory map, where a page past the end of the file
// is a fault; SetPanicOnFault makes that a panic too, for this goroutine, while fn runs.
// bbolt's transactions roll back in a deferred call, so after a recovered panic inside
// one the DB can still be closed.
func guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r}
		}
	}()
	return fn()
}
