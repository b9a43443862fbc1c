package admin

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/crankmcp/crank/host/catalog"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/ratelimit"
)

// Rate limits in the admin API: the schema of one (the console's form is
// built from it), the limits a catalog adds to its handlers' (read and
// replaced as a list, versioned with the catalog like its entries), and
// what this replica's budgets hold now (the console's live view).

func rateLimitSchema(_ *Gateway, w http.ResponseWriter, _ *http.Request, _ []string) error {
	w.Header().Set("Content-Type", "application/schema+json")
	_, err := w.Write(ratelimit.Schema())
	return err
}

// liveRateLimits lists the budgets of this replica: each limit, its
// scope, how many replicas enforce it and this one's share, and the calls
// it admitted and refused here.
func liveRateLimits(g *Gateway, w http.ResponseWriter, _ *http.Request, _ []string) error {
	var limits []ratelimit.State
	if g.RateLimits != nil {
		limits = g.RateLimits()
	}
	if limits == nil {
		limits = []ratelimit.State{}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"limits": limits})
}

func listCatalogRateLimits(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	return g.listOf(w, r, args[0], "rate_limits", func(d *catalog.Document) []json.RawMessage { return d.RateLimits })
}

// putCatalogRateLimits replaces a catalog's rate limits with the body's
// list (JSON), as a new version; each limit is checked as the catalog's
// load checks it, its problems placed at /<index>/<field>.
func putCatalogRateLimits(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	c, e := readChange(r, args)
	if e != nil {
		return e
	}
	body, e := readBody(r)
	if e != nil {
		return e
	}
	var limits []json.RawMessage
	if err := json.Unmarshal(body, &limits); err != nil {
		return &Error{Status: http.StatusBadRequest, Message: "the body is not a JSON list of rate limits: " + err.Error(),
			Problems: opsfile.Problems{{Message: "a JSON list of rate limits, such as [{\"name\": \"refunds\", \"rate\": \"10/m\"}]"}}}
	}
	var probs opsfile.Problems
	names := map[string]int{}
	for i, raw := range limits {
		l, ps := ratelimit.Decode(raw)
		for _, p := range ps {
			probs = append(probs, opsfile.Problem{Pointer: fmt.Sprintf("/%d/%s", i, p.Field), Message: p.Message}) // a limit's fields are flat
		}
		if j, dup := names[l.Name]; dup && len(ps) == 0 {
			probs = append(probs, opsfile.Problem{Pointer: fmt.Sprintf("/%d/name", i), Message: fmt.Sprintf("duplicate rate limit name (also /%d)", j)})
		}
		names[l.Name] = i
	}
	if probs != nil {
		return &Error{Status: http.StatusBadRequest, Problems: opsfile.PlaceLines(body, probs),
			Message: fmt.Sprintf("catalog %s: the rate limits are not valid (%d errors); nothing was saved", c.name, len(probs))}
	}
	head, prev, _, e := g.current(r.Context(), c.name)
	if e != nil {
		return e
	}
	if head == nil || head.Deleted {
		return errorf(http.StatusNotFound, "catalog %s not found", c.name)
	}
	if e := c.x.required(versionOf(head)); e != nil {
		return e
	}
	return g.write(w, r, change{name: c.name, expect: c.x.against(versionOf(head)), prev: prev, next: prev.WithRateLimits(limits),
		action: "rate_limits", message: c.msg, place: catalog.InFile}, http.StatusOK)
}
