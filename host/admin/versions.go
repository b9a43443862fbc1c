package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/crankmcp/crank/host/catalog"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/store"
)

func listVersions(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	name := args[0]
	if e := catalogName(name); e != nil {
		return e
	}
	limit, e := queryInt(r, "limit", 50, 1, 1000)
	if e != nil {
		return e
	}
	before, e := queryInt(r, "before", 0, 0, 1<<62)
	if e != nil {
		return e
	}
	vs, next, err := g.Store.ListCatalogVersions(r.Context(), name, before, int(limit))
	if err != nil {
		return storeError(err, "catalog "+name)
	}
	if vs == nil {
		vs = []*store.CatalogVersion{}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"versions": vs, "next_before": next})
}

// version reads one version and its document.
func (g *Gateway) version(ctx context.Context, name string, v int64) (*store.CatalogVersion, *catalog.Document, *Error) {
	ver, err := g.Store.GetCatalogVersion(ctx, name, v)
	if err != nil {
		return nil, nil, storeError(err, fmt.Sprintf("catalog %s version %d", name, v))
	}
	doc, err := catalog.Decode(ver.Document)
	if err != nil {
		return nil, nil, errorf(http.StatusInternalServerError, "catalog %s version %d: %v", name, v, err)
	}
	return ver, doc, nil
}

func parseVersion(what, s string) (int64, *Error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 1 {
		return 0, errorf(http.StatusBadRequest, "%s: %q is not a catalog version (a positive integer)", what, s)
	}
	return v, nil
}

func getVersion(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	name := args[0]
	if e := catalogName(name); e != nil {
		return e
	}
	v, e := parseVersion("version", args[1])
	if e != nil {
		return e
	}
	ver, doc, e := g.version(r.Context(), name, v)
	if e != nil {
		return e
	}
	if wantsYAML(r) {
		w.Header().Set("Content-Type", "application/yaml")
		_, err := w.Write(doc.YAML())
		return err
	}
	ops := doc.Operations
	if ops == nil {
		ops = []json.RawMessage{}
	}
	ver.Document = nil
	out := map[string]any{"version": ver, "operations": ops}
	if len(doc.RateLimits) > 0 {
		out["rate_limits"] = doc.RateLimits
	}
	return writeJSON(w, http.StatusOK, out)
}

// diffVersions answers what changed from one version to another
// (?from=&to=; to defaults to the current version, from to the one
// before to).
func diffVersions(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	name := args[0]
	if e := catalogName(name); e != nil {
		return e
	}
	q := r.URL.Query()
	var to int64
	if s := q.Get("to"); s != "" {
		v, e := parseVersion("query parameter to", s)
		if e != nil {
			return e
		}
		to = v
	} else {
		head, err := g.Store.GetCatalogHead(r.Context(), name)
		if err != nil {
			return storeError(err, "catalog "+name)
		}
		to = head.Version
	}
	from := to - 1
	if s := q.Get("from"); s != "" {
		v, e := parseVersion("query parameter from", s)
		if e != nil {
			return e
		}
		from = v
	}
	fromDoc := &catalog.Document{}
	if from > 0 {
		_, d, e := g.version(r.Context(), name, from)
		if e != nil {
			return e
		}
		fromDoc = d
	}
	_, toDoc, e := g.version(r.Context(), name, to)
	if e != nil {
		return e
	}
	changes := catalog.Diff(fromDoc, toDoc)
	if changes == nil {
		changes = []catalog.Change{}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"catalog": name, "from": from, "to": to, "changes": changes})
}

// rollback writes a new version whose content is an older one's
// (?version=N or {"version": N}).
func rollback(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	c, e := readChange(r, args)
	if e != nil {
		return e
	}
	name, x, msg := c.name, c.x, c.msg
	s := r.URL.Query().Get("version")
	if s == "" {
		body, e := readBody(r)
		if e != nil {
			return e
		}
		var req struct {
			Version int64 `json:"version"`
		}
		dec := json.NewDecoder(bytesReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.Version < 1 {
			return &Error{Status: http.StatusBadRequest, Message: `say which version to restore: {"version": N} or ?version=N`,
				Problems: opsfile.Problems{{Pointer: "/version", Message: "a positive version number is required"}}}
		}
		s = strconv.FormatInt(req.Version, 10)
	}
	v, e := parseVersion("version", s)
	if e != nil {
		return e
	}
	head, prev, e := g.readFor(r, name, x, true)
	if e != nil {
		return e
	}
	if v == head.Version {
		return errorf(http.StatusBadRequest, "catalog %s is at version %d already", name, v)
	}
	_, doc, e := g.version(r.Context(), name, v)
	if e != nil {
		return e
	}
	return g.write(w, r, change{name: name, expect: x.against(head.Version), prev: prev, next: doc, action: "rollback",
		message: msg, rollbackOf: v, place: catalog.InFile}, http.StatusOK)
}
