package admin

import (
	"errors"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
)

// Users' grants at upstreams (upstream_auth authorization_code): an
// operator sees how many users connected each upstream of each endpoint,
// never a user's tokens or scopes; a console user (the caller
// console:<user>) sees and revokes their own grants, the endpoint's OAuth
// user being the console's user.

// UpstreamGrants is one endpoint's authorization_code upstreams.
type UpstreamGrants struct {
	Endpoint  string `json:"endpoint"`
	Workspace string `json:"workspace"`
	// Upstreams count the users who connected each upstream.
	Upstreams []UpstreamCount `json:"upstreams"`
	// Mine are the console user's own grants (none for another caller).
	Mine []host.GrantInfo `json:"mine"`
}

// UpstreamCount is how many users connected an upstream.
type UpstreamCount struct {
	Upstream string `json:"upstream"`
	Users    int    `json:"users"`
}

// consoleUser is the console's user of a request, "" for another caller.
func consoleUser(r *http.Request) string {
	who, _ := caller(r)
	u, _ := strings.CutPrefix(who, "console:")
	if u == who {
		return ""
	}
	return u
}

// grantHosts are the serving hosts with authorization_code upstreams.
func grantHosts(g *Gateway) []struct {
	info EndpointInfo
	h    *host.Host
} {
	var out []struct {
		info EndpointInfo
		h    *host.Host
	}
	for _, ep := range g.Endpoints {
		se, ok := ep.(ServingEndpoint)
		if !ok {
			continue
		}
		if h := se.Serving(); h != nil && len(h.UpstreamGrants()) > 0 {
			out = append(out, struct {
				info EndpointInfo
				h    *host.Host
			}{ep.Info(), h})
		}
	}
	return out
}

func listUpstreamGrants(g *Gateway, w http.ResponseWriter, r *http.Request, _ []string) error {
	if g.Store == nil {
		return errorf(http.StatusServiceUnavailable, "the crank app has not started")
	}
	user := consoleUser(r)
	out := []UpstreamGrants{}
	for _, e := range grantHosts(g) {
		counts, err := g.Store.CountUpstreamGrants(r.Context(), e.info.Workspace)
		if err != nil {
			return storeError(err, "workspace "+e.info.Workspace)
		}
		ug := UpstreamGrants{Endpoint: e.info.ID, Workspace: e.info.Workspace, Mine: []host.GrantInfo{}}
		for _, n := range e.h.UpstreamGrants() {
			ug.Upstreams = append(ug.Upstreams, UpstreamCount{Upstream: n, Users: counts[n]})
		}
		if user != "" {
			mine, err := e.h.ListGrants(r.Context(), e.info.Workspace, user)
			if err != nil {
				return storeError(err, "workspace "+e.info.Workspace)
			}
			for i := range mine {
				mine[i].User = ""
			}
			ug.Mine = mine
		}
		out = append(out, ug)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"endpoints": out, "user": user})
}

func revokeUpstreamGrant(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	user := consoleUser(r)
	if user == "" {
		return errorf(http.StatusForbidden, "a grant is revoked by its own user, from the console (or the upstream_grants tool): the admin API has no user")
	}
	ws, upstream := args[0], args[1]
	for _, e := range grantHosts(g) {
		if e.info.Workspace != ws {
			continue
		}
		out, err := e.h.RevokeGrant(r.Context(), ws, user, upstream)
		if errors.Is(err, host.ErrUnknownUpstream) {
			continue
		}
		if err != nil {
			return storeError(err, "upstream "+upstream)
		}
		g.audit(r, "upstream_grant.revoke", "", nil, zap.String("workspace", ws), zap.String("upstream", upstream))
		return writeJSON(w, http.StatusOK, out)
	}
	return errorf(http.StatusNotFound, "no endpoint of workspace %q has upstream %q", ws, upstream)
}
