package serving

import (
	"container/list"
	"sync"
	"time"
)

// ttlCache is a size-bounded map whose entries expire. When full, it drops the least
// recently used entry, so a flood of distinct tokens cannot grow memory.
type ttlCache[V any] struct {
	size int

	mu    sync.Mutex
	order *list.List // of *cacheEntry[V], most recently used at the front
	items map[string]*list.Element
}

type cacheEntry[V any] struct {
	key     string
	val     V
	expires time.Time
}

func newTTLCache[V any](size int) *ttlCache[V] {
	return &ttlCache[V]{size: size, order: list.New(), items: make(map[string]*list.Element)}
}

// get returns the value stored under key unless it has expired by now.
func (c *ttlCache[V]) get(key string, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	el, ok := c.items[key]
	if !ok {
		return zero, false
	}
	e := el.Value.(*cacheEntry[V])
	if !now.Before(e.expires) {
		c.order.Remove(el)
		delete(c.items, key)
		return zero, false
	}
	c.order.MoveToFront(el)
	return e.val, true
}

// add stores val under key until now+ttl, evicting the least recently used entry
// when the cache is full.
func (c *ttlCache[V]) add(key string, val V, ttl time.Duration, now time.Time) {
	if ttl <= 0 || c.size <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		e := el.Value.(*cacheEntry[V])
		e.val, e.expires = val, now.Add(ttl)
		c.order.MoveToFront(el)
		return
	}
	for c.order.Len() >= c.size {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*cacheEntry[V]).key)
	}
	c.items[key] = c.order.PushFront(&cacheEntry[V]{key: key, val: val, expires: now.Add(ttl)})
}

// len returns the number of entries held, expired or not.
func (c *ttlCache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
