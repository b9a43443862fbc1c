package caddymodule

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/crankmcp/crank/host"
)

func init() {
	caddy.RegisterModule(Admin{})
}

// Admin serves Crank's admin API routes on Caddy's admin endpoint:
//
//	GET /crank/adapters   the adapter processes this Caddy runs
//	/crank/catalogs/…     operations catalogs: CRUD, versions, diff,
//	                      rollback, validation, test runs
//	/crank/endpoints      the crank handlers of the running config
//	/crank/tools          the tools those handlers serve now, and an
//	                      operator's call of one
//	/crank/live/…         open MCP sessions, stream sessions and jobs
//	GET /crank/rate-limits       this replica's rate limits: shares, calls
//	                             admitted and refused
//	GET /crank/schema/operation  the JSON Schema of an operation entry
//	GET /crank/schema/rate_limit the JSON Schema of a rate limit
//
// (docs/admin-api.md).
type Admin struct{}

// CaddyModule returns the Caddy module information.
func (Admin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "admin.api.crank", New: func() caddy.Module { return new(Admin) }}
}

// AdapterStatus is one adapter process as the admin API reports it.
type AdapterStatus struct {
	Name    string   `json:"name"`
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
	PID     int      `json:"pid"`
	Running bool     `json:"running"`
	Starts  int      `json:"starts"`
	Version string   `json:"version,omitempty"`
	// Modes are the modes its operations can take: its own unary calls
	// and windows, and the sessions and jobs the host builds on them.
	Modes    []string `json:"modes,omitempty"`
	Protocol []string `json:"protocols,omitempty"`
	// Restarts counts starts after the first (crashes, failed health
	// pings); Health is "ok", "exited" (the next call restarts it) or
	// "failing" (its last start failed: LastError says why).
	Restarts  int    `json:"restarts"`
	Health    string `json:"health"`
	Failures  int    `json:"failed_starts,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// ConfigSchema is the JSON Schema of an operation's config for it,
	// as the adapter publishes it.
	ConfigSchema json.RawMessage `json:"config_schema,omitempty"`
}

// Routes implements caddy.AdminRouter.
func (Admin) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/crank/adapters", Handler: caddy.AdminHandlerFunc(serveAdapters)},
		{Pattern: "/crank/catalogs", Handler: caddy.AdminHandlerFunc(serveCatalogAdmin)},
		{Pattern: "/crank/catalogs/", Handler: caddy.AdminHandlerFunc(serveCatalogAdmin)},
		{Pattern: "/crank/endpoints", Handler: caddy.AdminHandlerFunc(serveCatalogAdmin)},
		{Pattern: "/crank/tools", Handler: caddy.AdminHandlerFunc(serveCatalogAdmin)},
		{Pattern: "/crank/tools/", Handler: caddy.AdminHandlerFunc(serveCatalogAdmin)},
		{Pattern: "/crank/live/", Handler: caddy.AdminHandlerFunc(serveCatalogAdmin)},
		{Pattern: "/crank/schema/", Handler: caddy.AdminHandlerFunc(serveCatalogAdmin)},
		{Pattern: "/crank/rate-limits", Handler: caddy.AdminHandlerFunc(serveCatalogAdmin)},
	}
}

func serveAdapters(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: errMethod}
	}
	out := []AdapterStatus{}
	adapterPool.Range(func(_, v any) bool {
		s := v.(pooledSupervisor)
		spec := s.Spec()
		st := AdapterStatus{Name: spec.Name, Command: spec.Command, Args: spec.Args, PID: s.PID(), Starts: s.Starts()}
		st.Running = st.PID != 0
		st.Restarts = max(st.Starts-1, 0)
		st.Failures, st.LastError = s.Health()
		switch {
		case st.Failures > 0:
			st.Health = "failing"
		case s.Exited():
			st.Health = "exited"
		default:
			st.Health = "ok"
		}
		if d := s.Description(); d != nil {
			st.Version = d.Version
			st.Protocol = d.Protocols
			if json.Valid(d.ConfigSchema) {
				st.ConfigSchema = d.ConfigSchema
			}
			for _, m := range host.ModesOf(d.Modes) {
				st.Modes = append(st.Modes, string(m))
			}
		}
		out = append(out, st)
		return true
	})
	slices.SortFunc(out, func(a, b AdapterStatus) int { return strings.Compare(a.Name, b.Name) })
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(out)
}

var errMethod = methodError("method not allowed")

type methodError string

func (e methodError) Error() string { return string(e) }

// Interface guard.
var _ caddy.AdminRouter = Admin{}
