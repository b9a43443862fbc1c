package sdk

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestWatchParent(t *testing.T) {
	var ppid atomic.Int64
	ppid.Store(4242)
	gone := make(chan [2]int, 1)
	stop := watchParent(func() int { return int(ppid.Load()) }, time.Millisecond, func(was, now int) { gone <- [2]int{was, now} })
	defer stop()
	select {
	case g := <-gone:
		t.Fatalf("gone while the parent lives: %v", g)
	case <-time.After(20 * time.Millisecond):
	}
	ppid.Store(1) // re-parented to init: the host died
	select {
	case g := <-gone:
		if g != [2]int{4242, 1} {
			t.Errorf("gone(%d, %d), want gone(4242, 1)", g[0], g[1])
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a re-parented adapter did not notice")
	}

	// Started by init: nothing to watch, never gone.
	called := false
	watchParent(func() int { return 1 }, time.Millisecond, func(int, int) { called = true })()
	if called {
		t.Error("gone called for a process started by init")
	}
}
