package mcptest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Events is a loopback SSE upstream whose stream the test paces: GET
// /events sends the events {"n": 1} to {"n": N-1} (with "level", the
// query parameter, when given) at once, the last one only once the test
// calls Release, then holds the stream open until the client leaves. A
// window reading it with max_items N shows its first chunks while it is
// still open, whatever the machine's speed.
type Events struct {
	*httptest.Server
	n       int
	release chan struct{}
	once    sync.Once
	// Levels receives the level query parameter of each request (when
	// there is room).
	Levels chan string
}

// NewEvents starts an Events upstream of n events, closed (and
// released) when the test ends.
func NewEvents(t testing.TB, n int) *Events {
	e := &Events{n: n, release: make(chan struct{}), Levels: make(chan string, 16)}
	e.Server = httptest.NewServer(http.HandlerFunc(e.ServeEvents))
	t.Cleanup(func() {
		e.Release()
		e.Close()
	})
	return e
}

// Release lets the last event go.
func (e *Events) Release() { e.once.Do(func() { close(e.release) }) }

// ServeEvents serves the paced stream (any path).
func (e *Events) ServeEvents(w http.ResponseWriter, r *http.Request) {
	level := r.URL.Query().Get("level")
	select {
	case e.Levels <- level:
	default:
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	for i := 1; i <= e.n; i++ {
		if i == e.n {
			select {
			case <-e.release:
			case <-r.Context().Done():
				return
			}
		}
		if level != "" {
			fmt.Fprintf(w, "data: {\"n\": %d, \"level\": %q}\n\n", i, level)
		} else {
			fmt.Fprintf(w, "data: {\"n\": %d}\n\n", i)
		}
		_ = rc.Flush()
	}
	<-r.Context().Done()
}
