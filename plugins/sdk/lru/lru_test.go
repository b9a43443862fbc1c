package lru_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/crankmcp/crank/plugins/sdk/lru"
)

// A full cache drops the least recently used entry, read or written, and
// tells the eviction function; Delete tells it nothing.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	var evicted []string
	c := lru.New(3, func(k string, v int) { evicted = append(evicted, fmt.Sprint(k, v)) })
	c.Put("a", 1)
	c.Put("b", 2)
	c.Put("c", 3)
	c.Get("a")           // b is the oldest now
	c.Put("c", 30)       // an update makes no room
	c.Put("d", 4)        // drops b
	c.GetOrPut("a", nil) // found: make is not called
	if v, found := c.GetOrPut("e", func() int { return 5 }); found || v != 5 {
		t.Errorf("GetOrPut of a new key = %d, %v", v, found)
	} // drops c
	c.Delete("d")
	if _, ok := c.Get("b"); ok || c.Len() != 2 {
		t.Errorf("len %d, b there: %v", c.Len(), ok)
	}
	if fmt.Sprint(evicted) != "[b2 c30]" {
		t.Errorf("evicted %v, want [b2 c30]", evicted)
	}
	c.DeleteFunc(func(k string, _ int) bool { return k == "a" })
	if v, ok := c.Get("e"); !ok || v != 5 || c.Len() != 1 {
		t.Errorf("after DeleteFunc: e = %d, %v, len %d", v, ok, c.Len())
	}
}

// A bound below one is one; the cache is safe for concurrent use.
func TestCacheBoundAndConcurrency(t *testing.T) {
	t.Parallel()
	one := lru.New[int, int](0, nil)
	one.Put(1, 1)
	one.Put(2, 2)
	if _, ok := one.Get(1); ok || one.Len() != 1 {
		t.Errorf("a cache of bound 0 holds %d", one.Len())
	}
	c := lru.New[int, int](16, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				c.Put(g*1000+i, i)
				c.Get(g*1000 + i/2)
				c.GetOrPut(i%32, func() int { return i })
			}
		}()
	}
	wg.Wait()
	if n := c.Len(); n != 16 {
		t.Errorf("len %d, want 16", n)
	}
}

// DropOldest drops from the least recently used on, and stops at the
// first entry it keeps.
func TestDropOldest(t *testing.T) {
	t.Parallel()
	c := lru.New[int, int](10, nil)
	for i := range 5 {
		c.Put(i, i)
	}
	c.Get(0) // 0 is now the most recently used
	c.DropOldest(func(k, _ int) bool { return k < 3 })
	if c.Len() != 3 {
		t.Fatalf("%d entries left, want 3 (0, 3, 4)", c.Len())
	}
	for _, k := range []int{0, 3, 4} {
		if _, ok := c.Get(k); !ok {
			t.Errorf("%d was dropped", k)
		}
	}
}
