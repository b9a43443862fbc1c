package lru_test

import (
	"fmt"

	"github.com/crankmcp/crank/plugins/sdk/lru"
)

func ExampleCache() {
	sessions := lru.New(2, func(id string, _ int) { fmt.Println("closing", id) })
	sessions.Put("a", 1)
	sessions.Put("b", 2)
	sessions.Get("a")    // a is used again: b is the least recently used
	sessions.Put("c", 3) // full: b goes
	_, ok := sessions.Get("b")
	fmt.Println(ok, sessions.Len())
	// Output:
	// closing b
	// false 2
}
