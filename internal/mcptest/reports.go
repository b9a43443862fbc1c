package mcptest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Reports is a loopback REST upstream with a slow report. GET /report?n=N
// fails with 500 for n 500, answers {"n":N,"rows":3} at once for n >= 1000,
// and for any other n answers only once the test releases it — or notes
// that the request was cancelled. GET /users/{id} answers {"name":"Ada"}.
type Reports struct {
	*httptest.Server
	mu     sync.Mutex
	events map[string]chan struct{}
}

// NewReports starts a Reports upstream, closed when the test ends.
func NewReports(t testing.TB) *Reports {
	u := &Reports{events: map[string]chan struct{}{}}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *Reports) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if strings.HasPrefix(r.URL.Path, "/users/") {
		_, _ = io.WriteString(w, `{"name":"Ada"}`)
		return
	}
	n := r.URL.Query().Get("n")
	v, _ := strconv.Atoi(n)
	switch {
	case v == 500:
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":"report engine down"}`)
		return
	case v < 1000:
		close(u.Event("arrived", n))
		select {
		case <-u.Event("release", n):
		case <-r.Context().Done():
			close(u.Event("cancelled", n))
			return
		}
	}
	_, _ = fmt.Fprintf(w, `{"n":%s,"rows":3}`, n)
}

// Event returns the channel closed when report n has the named event:
// "arrived" (the request came in), "cancelled" (the gateway dropped it),
// or "release" (closed by the test, to let the report answer).
func (u *Reports) Event(name, n string) chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	c, ok := u.events[name+" "+n]
	if !ok {
		c = make(chan struct{})
		u.events[name+" "+n] = c
	}
	return c
}

// Release lets report n answer.
func (u *Reports) Release(n string) { close(u.Event("release", n)) }

// Await waits for an event of report n (failing the test after 30s).
func (u *Reports) Await(t testing.TB, name, n string) {
	t.Helper()
	select {
	case <-u.Event(name, n):
	case <-time.After(30 * time.Second):
		t.Fatalf("upstream: report %s never %s", n, name)
	}
}
