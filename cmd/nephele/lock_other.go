//go:build !linux

package main

// lockFile is the file in the state directory up would lock; only Linux locks it.
const lockFile = "lock"

// dirLock does nothing outside Linux, where up's loopback addresses do not work anyway
// (docs/up.md).
type dirLock struct{}

func lockDir(string) (*dirLock, error) { return &dirLock{}, nil }

func (*dirLock) release() error { return nil }
