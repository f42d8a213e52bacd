package keylock

import "sync"

// Locks hands out one mutex per key, kept only while someone holds or waits for it, so
// it never outgrows the keys in use. The zero value is ready to use; it must not be
// copied after first use.
type Locks struct {
	mu    sync.Mutex
	locks map[string]*lock
}

type lock struct {
	mu    sync.Mutex
	users int
}

// Lock locks key, waiting while another caller holds it, and returns the function that
// unlocks it.
func (k *Locks) Lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*lock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &lock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()

	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
