package mcptest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// UsersOps is an operations file, a format string of the Users upstream's
// URL: get_user, a read-only tool of the REST adapter, which sends the
// value of the environment variable CRANK_TEST_USERS_TOKEN as X-Token.
const UsersOps = `version: 1
operations:
  - name: get_user
    title: Get a user
    description: Fetch one user by numeric id.
    adapter: rest
    timeout: 5s
    annotations: {read_only: true}
    input_schema:
      type: object
      properties:
        id: {type: integer, minimum: 1}
      required: [id]
    config:
      method: GET
      url: "%s/users/{id}"
      headers:
        X-Token: "{env.CRANK_TEST_USERS_TOKEN}"
`

// Users is a loopback REST upstream of users: GET /users/{id} answers
// {"id":<id>,"name":"Ada Lovelace"}, except /users/404, which is a 404.
// It keeps the method and path of every request and the last X-Token
// header.
type Users struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
	token string
}

// NewUsers starts a Users upstream, closed when the test ends.
func NewUsers(t testing.TB) *Users {
	u := &Users{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.paths = append(u.paths, r.Method+" "+r.URL.Path)
		u.token = r.Header.Get("X-Token")
		u.mu.Unlock()
		id := strings.TrimPrefix(r.URL.Path, "/users/")
		if id == "404" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":"no such user"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"id":%s,"name":"Ada Lovelace"}`, id)
	}))
	t.Cleanup(u.Close)
	return u
}

// Requests returns the method and path of every request so far, and the
// X-Token header of the last one.
func (u *Users) Requests() (paths []string, token string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.paths), u.token
}

// WaitUntil polls cond until it holds, failing the test after 10s.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
