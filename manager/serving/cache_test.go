package serving

import (
	"fmt"
	"testing"
	"time"
)

func TestTTLCache(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newTTLCache[int](3)
	for i := range 3 {
		c.add(fmt.Sprint(i), i, 10*time.Second, t0)
	}
	if v, ok := c.get("0", t0); !ok || v != 0 {
		t.Fatalf("get 0 = %d, %v", v, ok)
	}
	// "0" was just used, so adding a fourth entry evicts "1", the least recently used.
	c.add("3", 3, 10*time.Second, t0)
	if n := c.len(); n != 3 {
		t.Errorf("len = %d, want the bound 3", n)
	}
	for _, tt := range []struct {
		key  string
		want bool
	}{{"0", true}, {"1", false}, {"3", true}, {"2", true}} {
		if _, ok := c.get(tt.key, t0); ok != tt.want {
			t.Errorf("get %s present = %v, want %v", tt.key, ok, tt.want)
		}
	}

	// "0" is now the least recently used and makes room for "short".
	c.add("short", 9, time.Second, t0)
	if _, ok := c.get("0", t0); ok {
		t.Errorf("least recently used entry not evicted")
	}
	if _, ok := c.get("short", t0.Add(999*time.Millisecond)); !ok {
		t.Errorf("entry gone before its TTL")
	}
	if _, ok := c.get("short", t0.Add(time.Second)); ok {
		t.Errorf("entry still there at its TTL")
	}
	if n := c.len(); n != 2 {
		t.Errorf("len after an expired get = %d, want 2 (expired entry dropped)", n)
	}

	// Re-adding a key refreshes its value and expiry without growing the cache.
	c.add("2", 20, 10*time.Second, t0.Add(5*time.Second))
	if v, ok := c.get("2", t0.Add(12*time.Second)); !ok || v != 20 {
		t.Errorf("refreshed entry = %d, %v; want 20, true", v, ok)
	}
	if n := c.len(); n != 2 {
		t.Errorf("len after refreshing = %d, want 2", n)
	}

	c.add("never", 1, 0, t0)
	if _, ok := c.get("never", t0); ok {
		t.Errorf("entry with no TTL was stored")
	}
}
