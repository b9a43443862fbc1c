package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/catalog"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/window"
	"github.com/crankmcp/crank/store"
)

// CatalogView is a catalog as GET /crank/catalogs/{name} answers it: its
// head, the current version's record and its operations as written.
type CatalogView struct {
	Catalog    *store.CatalogHead    `json:"catalog"`
	Version    *store.CatalogVersion `json:"version,omitempty"`
	Operations []json.RawMessage     `json:"operations"`
	// RateLimits are the catalog's rate limits (none: left out).
	RateLimits []json.RawMessage `json:"rate_limits,omitempty"`
	// Warnings are the adapters' warnings about the version just written.
	Warnings opsfile.Problems `json:"warnings,omitempty"`
}

// Validation is the answer of a validation without saving.
type Validation struct {
	Valid    bool             `json:"valid"`
	Errors   opsfile.Problems `json:"errors"`
	Warnings opsfile.Problems `json:"warnings"`
	// Effective is, for one entry that compiles, what the host makes of
	// it: every limit, aggregation and safety setting with the defaults
	// (and its preset's) filled in.
	Effective *Effective `json:"effective,omitempty"`
}

// Effective is an operation's execution as the host runs it.
type Effective struct {
	Mode      string         `json:"mode"`
	TimeoutMS int64          `json:"timeout_ms"`
	Execution *window.Config `json:"execution,omitempty"`
}

// effectiveOf compiles doc and describes its entry op (nil when it does
// not compile).
func effectiveOf(name string, doc *catalog.Document, op string) *Effective {
	cat, err := doc.Compile("catalog "+name, shapeOnly)
	if err != nil {
		return nil
	}
	o, ok := cat.Lookup(op)
	if !ok {
		return nil
	}
	return &Effective{Mode: string(o.Mode), TimeoutMS: o.Timeout.Milliseconds(), Execution: o.Execution}
}

// shapeOnly compiles a document for its shape alone: no placeholder is
// expanded, so none is refused yet; the hosts a check builds apply their
// handler's catalog_allow.
var shapeOnly = opsfile.LoadOptions{Expand: func(s string) string { return s }, Allow: &opsfile.CatalogAllow{Placeholders: []string{"*"}}}

func catalogName(name string) *Error {
	if !store.ValidCatalogName(name) {
		return errorf(http.StatusBadRequest, "catalog name %q: must be 1-64 characters of A-Z a-z 0-9 _ . -, starting with a letter or digit", name)
	}
	return nil
}

// current reads a catalog's head and document; a catalog that does not
// exist is version 0 with no operations.
func (g *Gateway) current(ctx context.Context, name string) (*store.CatalogHead, *catalog.Document, *store.CatalogVersion, *Error) {
	head, ver, err := g.Store.GetCatalog(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &catalog.Document{}, nil, nil
	}
	if err != nil {
		return nil, nil, nil, storeError(err, "catalog "+name)
	}
	doc := &catalog.Document{}
	if !head.Deleted && ver != nil {
		if doc, err = catalog.Decode(ver.Document); err != nil {
			return nil, nil, nil, errorf(http.StatusInternalServerError, "catalog %s version %d: %v", name, head.Version, err)
		}
	}
	return head, doc, ver, nil
}

// readFor reads the catalog a change applies to and checks the request
// said which version it read (must: the catalog must exist).
func (g *Gateway) readFor(r *http.Request, name string, x expectation, must bool) (*store.CatalogHead, *catalog.Document, *Error) {
	head, doc, _, e := g.current(r.Context(), name)
	if e != nil {
		return nil, nil, e
	}
	if head == nil && must {
		return nil, nil, errorf(http.StatusNotFound, "catalog %s not found", name)
	}
	if e := x.required(versionOf(head)); e != nil {
		return nil, nil, e
	}
	return head, doc, nil
}

func versionOf(head *store.CatalogHead) int64 {
	if head == nil {
		return 0
	}
	return head.Version
}

// check runs the load checks on doc as it would be served: by every
// handler of this replica that serves the catalog (with its operations
// files and its catalog_allow, so a tool name both define, or an entry
// reaching what it may not, is an error). A catalog no handler here
// serves is checked for its shape alone, with a warning: what its
// entries may reach is the business of the handlers that serve it, and
// no adapter sees an entry before one does. Errors and warnings are
// placed with place.
func (g *Gateway) check(ctx context.Context, name string, doc *catalog.Document, place catalog.Place) (errs, warns opsfile.Problems) {
	source := "catalog " + name
	if _, err := doc.Compile(source, shapeOnly); err != nil {
		return catalog.ProblemsOf(err, source, doc, place), nil
	}
	var builders []func() (*host.Host, error)
	for _, ep := range g.Endpoints {
		if ep.Info().Catalog == name {
			builders = append(builders, func() (*host.Host, error) { return ep.Build(ctx, doc, true) })
		}
	}
	if len(builders) == 0 {
		warns = append(warns, opsfile.Problem{Message: "no handler of this replica serves catalog " + name +
			": its entries were checked for their shape only; each replica whose handler serves it checks them in full (adapters, catalog_allow) and serves no version that fails"})
	}
	seen := map[string]bool{}
	add := func(list *opsfile.Problems, ps opsfile.Problems) {
		for _, p := range ps {
			if k := p.Error(); !seen[k] {
				seen[k] = true
				*list = append(*list, p)
			}
		}
	}
	for _, build := range builders {
		h, err := build()
		if err != nil {
			add(&errs, catalog.ProblemsOf(err, source, doc, place))
			continue
		}
		add(&warns, catalog.ProblemsOf(h.Warnings().Err(), source, doc, place))
	}
	return errs, warns
}

// change is one write of a catalog.
type change struct {
	name       string
	expect     int64
	prev, next *catalog.Document
	action     string
	message    string
	rollbackOf int64
	deleted    bool
	place      catalog.Place
	// skipCheck: the document needs no load check (a deletion).
	skipCheck bool
	// body is the request's text the problems' pointers point into
	// (nil: none the client sent as text).
	body []byte
}

// write checks and stores a change, audits it and answers the new head.
func (g *Gateway) write(w http.ResponseWriter, r *http.Request, c change, status int) error {
	ctx := r.Context()
	var warns opsfile.Problems
	if !c.skipCheck {
		var errs opsfile.Problems
		errs, warns = g.check(ctx, c.name, c.next, c.place)
		if c.body != nil {
			errs, warns = opsfile.PlaceLines(c.body, errs), opsfile.PlaceLines(c.body, warns)
		}
		if len(errs) > 0 {
			return &Error{Status: http.StatusUnprocessableEntity, Problems: errs, Warnings: warns,
				Message: fmt.Sprintf("catalog %s: the change does not load (%d errors); nothing was saved", c.name, len(errs))}
		}
	}
	who, operator := caller(r)
	changes := catalog.Diff(c.prev, c.next)
	head, err := g.Store.PutCatalog(ctx, store.CatalogWrite{Catalog: c.name, Expect: c.expect, Author: who, Operator: operator,
		Message: c.message, Action: c.action, RollbackOf: c.rollbackOf, Changes: catalog.StoreChanges(changes),
		Deleted: c.deleted, Operations: len(c.next.Operations), Document: c.next.JSON(), Keep: g.History})
	g.audit(r, "catalog."+c.action, c.name, err, zap.Int64("expected_version", c.expect), zap.Int("changes", len(changes)))
	if err != nil {
		return storeError(err, "catalog "+c.name)
	}
	if warns == nil {
		warns = opsfile.Problems{}
	}
	if changes == nil {
		changes = []catalog.Change{}
	}
	w.Header().Set("ETag", etag(head.Version))
	return writeJSON(w, status, map[string]any{"catalog": head, "changes": changes, "warnings": warns})
}

// audit records a mutating call or test run.
func (g *Gateway) audit(r *http.Request, event, name string, err error, fields ...zap.Field) {
	if g.Audit == nil {
		return
	}
	who, operator := caller(r)
	fields = append([]zap.Field{zap.String("event", event), zap.String("catalog", name), zap.String("caller", who),
		zap.String("operator", operator), zap.String("remote_addr", r.RemoteAddr), zap.String("method", r.Method),
		zap.String("path", r.URL.Path)}, fields...)
	if err != nil {
		fields = append(fields, zap.String("outcome", "error"), zap.String("error", err.Error()))
	} else {
		fields = append(fields, zap.String("outcome", "ok"))
	}
	g.Audit.Info("admin", fields...)
}

func listCatalogs(g *Gateway, w http.ResponseWriter, r *http.Request, _ []string) error {
	limit, e := queryInt(r, "limit", 100, 1, 1000)
	if e != nil {
		return e
	}
	heads, next, err := g.Store.ListCatalogs(r.Context(), r.URL.Query().Get("after"), int(limit))
	if err != nil {
		return storeError(err, "catalogs")
	}
	if heads == nil {
		heads = []*store.CatalogHead{}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"catalogs": heads, "next": next})
}

// wantsYAML: the client asked for the catalog as an operations file.
func wantsYAML(r *http.Request) bool {
	f := r.URL.Query().Get("format")
	return f == "yaml" || (f == "" && strings.Contains(r.Header.Get("Accept"), "yaml"))
}

func getCatalog(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	name := args[0]
	if e := catalogName(name); e != nil {
		return e
	}
	head, doc, ver, e := g.current(r.Context(), name)
	if e != nil {
		return e
	}
	if head == nil {
		return errorf(http.StatusNotFound, "catalog %s not found", name)
	}
	w.Header().Set("ETag", etag(head.Version))
	if wantsYAML(r) {
		w.Header().Set("Content-Type", "application/yaml")
		_, err := w.Write(doc.YAML())
		return err
	}
	if ver != nil {
		ver.Document = nil
	}
	ops := doc.Operations
	if ops == nil {
		ops = []json.RawMessage{}
	}
	return writeJSON(w, http.StatusOK, CatalogView{Catalog: head, Version: ver, Operations: ops, RateLimits: doc.RateLimits})
}

// putCatalog replaces (or creates) a catalog with an operations file:
// the import of a whole file.
func putCatalog(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	c, e := readChange(r, args)
	if e != nil {
		return e
	}
	name, x, msg := c.name, c.x, c.msg
	body, e := readBody(r)
	if e != nil {
		return e
	}
	doc, probs := catalog.ParseDocument(body)
	if probs != nil {
		return &Error{Status: http.StatusBadRequest, Problems: probs,
			Message: fmt.Sprintf("catalog %s: the body is not a valid operations file (%d errors); nothing was saved", name, len(probs))}
	}
	head, prev, _, e := g.current(r.Context(), name)
	if e != nil {
		return e
	}
	cur := versionOf(head)
	if e := x.required(cur); e != nil {
		return e
	}
	action, status := "replace", http.StatusOK
	if head == nil || head.Deleted {
		action, status = "create", http.StatusCreated
	}
	if queryBool(r, "import") {
		action = "import"
	}
	return g.write(w, r, change{name: name, expect: x.against(versionOf(head)), prev: prev, next: doc, action: action, message: msg,
		place: catalog.InFile, body: body}, status)
}

// deleteCatalog writes a deletion (a version without operations; the
// history stays), or with ?purge=true removes the catalog and its whole
// history.
func deleteCatalog(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	c, e := readChange(r, args)
	if e != nil {
		return e
	}
	name, x, msg := c.name, c.x, c.msg
	head, prev, e := g.readFor(r, name, x, true)
	if e != nil {
		return e
	}
	if queryBool(r, "purge") {
		for _, ep := range g.Endpoints {
			if ep.Info().Catalog == name {
				return errorf(http.StatusConflict, "catalog %s: handler %s serves it; remove it from the config before purging its history", name, ep.Info().ID)
			}
		}
		err := g.Store.PurgeCatalog(r.Context(), name, x.against(head.Version))
		g.audit(r, "catalog.purge", name, err)
		if err != nil {
			return storeError(err, "catalog "+name)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if head.Deleted {
		return errorf(http.StatusNotFound, "catalog %s is already deleted (version %d); purge=true removes its history", name, head.Version)
	}
	return g.write(w, r, change{name: name, expect: x.against(versionOf(head)), prev: prev, next: &catalog.Document{}, action: "delete",
		message: msg, deleted: true, skipCheck: true}, http.StatusOK)
}

// validateCatalog checks an operations file as PUT would, without
// saving: 200 with the errors and warnings.
func validateCatalog(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	name := args[0]
	if e := catalogName(name); e != nil {
		return e
	}
	body, e := readBody(r)
	if e != nil {
		return e
	}
	var doc *catalog.Document
	var probs opsfile.Problems
	var entryName string
	place := catalog.InFile
	if op := r.URL.Query().Get("operation"); op != "" || queryBool(r, "entry") {
		// One entry, checked within the catalog's current document.
		entry, ps := catalog.ParseEntry(body)
		if ps != nil {
			return writeJSON(w, http.StatusOK, Validation{Errors: ps, Warnings: opsfile.Problems{}})
		}
		_, cur, _, e := g.current(r.Context(), name)
		if e != nil {
			return e
		}
		if op != "" && op != entryNameOf(entry) {
			cur = cur.Without(op)
		}
		doc = cur.With(entry)
		entryName = entryNameOf(entry)
		place = catalog.AsEntry(doc.Index(entryName))
	} else if doc, probs = catalog.ParseDocument(body); probs != nil {
		return writeJSON(w, http.StatusOK, Validation{Errors: probs, Warnings: opsfile.Problems{}})
	}
	errs, warns := g.check(r.Context(), name, doc, place)
	errs, warns = opsfile.PlaceLines(body, errs), opsfile.PlaceLines(body, warns)
	if errs == nil {
		errs = opsfile.Problems{}
	}
	if warns == nil {
		warns = opsfile.Problems{}
	}
	v := Validation{Valid: len(errs) == 0, Errors: errs, Warnings: warns}
	if entryName != "" {
		v.Effective = effectiveOf(name, doc, entryName)
	}
	return writeJSON(w, http.StatusOK, v)
}

func entryNameOf(raw json.RawMessage) string {
	var e struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(raw, &e)
	return e.Name
}

// operationSchema answers the JSON Schema of an operation entry (GET
// /crank/schema/operation).
func operationSchema(_ *Gateway, w http.ResponseWriter, _ *http.Request, _ []string) error {
	w.Header().Set("Content-Type", "application/schema+json")
	_, err := w.Write(opsfile.OperationSchema())
	return err
}
