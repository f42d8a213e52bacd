package keylock

import (
	"sync"
	"testing"
)

func TestLocksSerializeOneKeyAndForgetIt(t *testing.T) {
	var k Locks
	var wg sync.WaitGroup
	counts := map[string]*int{"a": new(int), "b": new(int)}
	for i := range 200 {
		key := []string{"a", "b"}[i%2]
		wg.Go(func() {
			defer k.Lock(key)()
			*counts[key]++ // the race detector fails the test if two holders of one key overlap
		})
	}
	wg.Wait()
	if *counts["a"] != 100 || *counts["b"] != 100 {
		t.Errorf("counts = %d, %d, want 100 each", *counts["a"], *counts["b"])
	}
	if n := len(k.locks); n != 0 {
		t.Errorf("%d locks kept after every holder left, want 0", n)
	}
}
