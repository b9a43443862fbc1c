// Package lru is Crank's one bounded cache: a map of at most a fixed
// number of entries that drops the least recently used entry to make room
// for a new key. Every bounded cache of the gateway and the adapters uses
// it (prepared adapter configs, verified and upstream tokens, unknown MCP
// session IDs, compiled JSON Schemas, SSE stream records, descriptor
// sets, upstream MCP sessions); it lives in the SDK module, with the standard library only,
// so that the gateway's packages and the adapters share it.
//
// One eviction rule fits them all: an entry read or written recently is
// likely to be needed again, and one that expired (a token, a negative
// entry) is replaced when it is next asked for, or ages out unread.
package lru

import "sync"

// Cache holds at most its bound of entries. Get, GetOrPut and Put make an
// entry the most recently used; adding a key to a full cache first drops
// the least recently used entry (and calls the eviction function with
// it). A Cache is safe for concurrent use.
type Cache[K comparable, V any] struct {
	mu      sync.Mutex
	max     int
	onEvict func(K, V)
	m       map[K]*entry[K, V]
	// root is the sentinel of the list of entries, most recently used
	// first: root.next is the newest, root.prev the oldest.
	root entry[K, V]
}

type entry[K comparable, V any] struct {
	key        K
	value      V
	prev, next *entry[K, V]
}

// New returns an empty cache of at most size entries (at least one).
// onEvict, when not nil, is called with each entry the bound drops (not
// the ones Delete or DeleteFunc drop), after the cache's lock is released.
func New[K comparable, V any](size int, onEvict func(K, V)) *Cache[K, V] {
	c := &Cache[K, V]{max: max(size, 1), onEvict: onEvict, m: map[K]*entry[K, V]{}}
	c.root.next, c.root.prev = &c.root, &c.root
	return c
}

// Get returns the value of key and whether it is there.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[key]
	if e == nil {
		var zero V
		return zero, false
	}
	c.toFront(e)
	return e.value, true
}

// Put sets the value of key.
func (c *Cache[K, V]) Put(key K, value V) {
	c.mu.Lock()
	if e := c.m[key]; e != nil {
		e.value = value
		c.toFront(e)
		c.mu.Unlock()
		return
	}
	old := c.add(key, value)
	c.mu.Unlock()
	c.evicted(old)
}

// GetOrPut returns the value of key when it is there (found), else sets
// it to mk() and returns that. mk runs under the cache's lock: keep it
// short, and never call the cache from it.
func (c *Cache[K, V]) GetOrPut(key K, mk func() V) (value V, found bool) {
	c.mu.Lock()
	if e := c.m[key]; e != nil {
		c.toFront(e)
		c.mu.Unlock()
		return e.value, true
	}
	value = mk()
	old := c.add(key, value)
	c.mu.Unlock()
	c.evicted(old)
	return value, false
}

// Delete drops key.
func (c *Cache[K, V]) Delete(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[key]; e != nil {
		c.remove(e)
	}
}

// DeleteFunc drops every entry for which del returns true. del runs under
// the cache's lock.
func (c *Cache[K, V]) DeleteFunc(del func(K, V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.m {
		if del(e.key, e.value) {
			c.remove(e)
		}
	}
}

// DropOldest drops the least recently used entries, oldest first, for as
// long as drop returns true for them (entries that expire in the order
// they were last used, such as ones kept for a while after their last
// use): it stops at the first it keeps. drop runs under the cache's lock.
func (c *Cache[K, V]) DropOldest(drop func(K, V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.root.prev; e != &c.root && drop(e.key, e.value); e = c.root.prev {
		c.remove(e)
	}
}

// Len is the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// add inserts a new key as the most recently used and returns the entry it
// dropped to make room, if any; c.mu is held.
func (c *Cache[K, V]) add(key K, value V) *entry[K, V] {
	var old *entry[K, V]
	if len(c.m) >= c.max {
		old = c.root.prev
		c.remove(old)
	}
	e := &entry[K, V]{key: key, value: value}
	c.m[key] = e
	c.link(e)
	return old
}

func (c *Cache[K, V]) evicted(e *entry[K, V]) {
	if e != nil && c.onEvict != nil {
		c.onEvict(e.key, e.value)
	}
}

func (c *Cache[K, V]) remove(e *entry[K, V]) {
	delete(c.m, e.key)
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *Cache[K, V]) toFront(e *entry[K, V]) {
	if c.root.next == e {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	c.link(e)
}

// link puts e first in the list.
func (c *Cache[K, V]) link(e *entry[K, V]) {
	e.prev, e.next = &c.root, c.root.next
	c.root.next.prev = e
	c.root.next = e
}
