// Package demo is the demo upstream of `make run`: a small in-memory REST
// API served by Caddy itself (handler module http.handlers.crank_demo), so
// the demo needs no network and no other process. It is compiled into
// cmd/crank only; a production build made with xcaddy does not include it.
//
// Routes:
//
//	GET    /users            list users (?limit=N)
//	GET    /users/{id}       one user, 404 when absent
//	POST   /users            create a user from {"name","email"}; 201
//	DELETE /users/{id}       delete a user; 204
//	GET    /slow?ms=N        answers after N milliseconds
//	GET    /health           {"status":"ok"}
//	GET    /openapi.json     the API's own OpenAPI document (demo/openapi.json),
//	                         which demo/openapi.yaml imports as tools
package demo

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(API{})
	httpcaddyfile.RegisterHandlerDirective("crank_demo", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		a := new(API)
		return a, a.UnmarshalCaddyfile(h.Dispenser)
	})
	httpcaddyfile.RegisterDirectiveOrder("crank_demo", httpcaddyfile.Before, "respond")
}

// openAPIDocument describes the demo API (and its log stream); it is served
// at GET /openapi.json and imported, from the same file, by
// demo/openapi.yaml.
//
//go:embed openapi.json
var openAPIDocument []byte

// API is the demo REST API.
type API struct {
	mux   *http.ServeMux
	mu    *sync.Mutex
	users map[int]User
	next  int
}

// User is the demo resource.
type User struct {
	ID    int    `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

// CaddyModule returns the Caddy module information.
func (API) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.crank_demo", New: func() caddy.Module { return new(API) }}
}

// UnmarshalCaddyfile takes no arguments: `crank_demo`.
func (a *API) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// Provision seeds the users and routes.
func (a *API) Provision(caddy.Context) error {
	a.users = map[int]User{
		1: {1, "Ada Lovelace", "ada@example.com"},
		2: {2, "Alan Turing", "alan@example.com"},
		3: {3, "Grace Hopper", "grace@example.com"},
	}
	a.next = 4
	a.mu = new(sync.Mutex)
	a.mux = http.NewServeMux()
	a.mux.HandleFunc("GET /users", a.list)
	a.mux.HandleFunc("GET /users/{id}", a.get)
	a.mux.HandleFunc("POST /users", a.create)
	a.mux.HandleFunc("DELETE /users/{id}", a.delete)
	a.mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"slept_ms": ms})
	})
	a.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	a.mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openAPIDocument)
	})
	return nil
}

// ServeHTTP serves the API.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	a.mux.ServeHTTP(w, r)
	return nil
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	out := make([]User, 0, len(a.users))
	for _, u := range a.users {
		out = append(out, u)
	}
	a.mu.Unlock()
	slices.SortFunc(out, func(x, y User) int { return x.ID - y.ID })
	if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n >= 0 && n < len(out) {
		out = out[:n]
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": out, "count": len(out)})
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.Atoi(r.PathValue("id"))
	a.mu.Lock()
	u, ok := a.users[id]
	a.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no user with id " + r.PathValue("id")})
		return
	}
	writeJSON(w, http.StatusOK, u)
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	var u User
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&u); err != nil || u.Name == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body must be {\"name\": ..., \"email\": ...}"})
		return
	}
	a.mu.Lock()
	u.ID = a.next
	a.next++
	a.users[u.ID] = u
	a.mu.Unlock()
	writeJSON(w, http.StatusCreated, u)
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.Atoi(r.PathValue("id"))
	a.mu.Lock()
	_, ok := a.users[id]
	delete(a.users, id)
	a.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no user with id " + r.PathValue("id")})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// DemoSecret is the secret the demo's upstreams expect of the gateway:
// CRANK_DEMO_TOKEN, which the operations files send through a
// placeholder, or "demo-token" (make run's default) when it is unset.
func DemoSecret() string {
	if v := os.Getenv("CRANK_DEMO_TOKEN"); v != "" {
		return v
	}
	return "demo-token"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*API)(nil)
	_ caddyhttp.MiddlewareHandler = (*API)(nil)
	_ caddyfile.Unmarshaler       = (*API)(nil)
)
