package admin

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/crankmcp/crank/host/catalog"
	"github.com/crankmcp/crank/host/opsfile"
)

func listOperations(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	return g.listOf(w, r, args[0], "operations", func(d *catalog.Document) []json.RawMessage { return d.Operations })
}

// listOf answers a list of the current version of the catalog name (its
// entries, or its rate limits), as {"version": …, key: […]}.
func (g *Gateway) listOf(w http.ResponseWriter, r *http.Request, name, key string, list func(*catalog.Document) []json.RawMessage) error {
	if e := catalogName(name); e != nil {
		return e
	}
	head, doc, _, e := g.current(r.Context(), name)
	if e != nil {
		return e
	}
	if head == nil {
		return errorf(http.StatusNotFound, "catalog %s not found", name)
	}
	w.Header().Set("ETag", etag(head.Version))
	out := list(doc)
	if out == nil {
		out = []json.RawMessage{}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"version": head.Version, key: out})
}

func getOperation(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	name, op := args[0], args[1]
	if e := catalogName(name); e != nil {
		return e
	}
	head, doc, _, e := g.current(r.Context(), name)
	if e != nil {
		return e
	}
	entry := doc.Entry(op)
	if head == nil || entry == nil {
		return errorf(http.StatusNotFound, "operation %s not found in catalog %s", op, name)
	}
	w.Header().Set("ETag", etag(head.Version))
	if wantsYAML(r) {
		w.Header().Set("Content-Type", "application/yaml")
		_, err := w.Write((&catalog.Document{Operations: []json.RawMessage{entry}}).YAML())
		return err
	}
	return writeJSON(w, http.StatusOK, entry)
}

// entryRequest reads the body of a request for one entry and the
// catalog it changes.
type entryRequest struct {
	x     expectation
	msg   string
	entry json.RawMessage
	body  []byte // as sent (nil for a merge patch)
}

func readEntryRequest(r *http.Request, args []string) (*entryRequest, *Error) {
	c, e := readChange(r, args)
	if e != nil {
		return nil, e
	}
	x, msg := c.x, c.msg
	body, e := readBody(r)
	if e != nil {
		return nil, e
	}
	entry, probs := catalog.ParseEntry(body)
	if probs != nil {
		return nil, &Error{Status: http.StatusBadRequest, Problems: probs,
			Message: fmt.Sprintf("the body is not a valid operation entry (%d errors); nothing was saved", len(probs))}
	}
	return &entryRequest{x: x, msg: msg, entry: entry, body: body}, nil
}

// createOperation adds an entry (POST …/operations); the catalog is
// created when it does not exist.
func createOperation(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	req, e := readEntryRequest(r, args)
	if e != nil {
		return e
	}
	return g.putEntry(w, r, args[0], entryNameOf(req.entry), req, "create")
}

// replaceOperation puts an entry in place of the one named in the path
// (or adds it). Renaming is a replace whose body names another operation.
func replaceOperation(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	name, op := args[0], args[1]
	req, e := readEntryRequest(r, args)
	if e != nil {
		return e
	}
	return g.putEntry(w, r, name, op, req, "replace")
}

func (g *Gateway) putEntry(w http.ResponseWriter, r *http.Request, name, op string, req *entryRequest, action string) error {
	newName := entryNameOf(req.entry) // named: ParseEntry checked it
	head, prev, e := g.readFor(r, name, req.x, false)
	if e != nil {
		return e
	}
	cur := versionOf(head)
	if action == "create" && prev.Index(op) >= 0 {
		return &Error{Status: http.StatusConflict, Message: fmt.Sprintf("catalog %s already has an operation %s; PUT …/operations/%s replaces it", name, op, op),
			Problems: opsfile.Problems{{Pointer: "/name", Operation: op, Message: "an operation of this name exists already"}}}
	}
	status := http.StatusOK
	if prev.Index(op) < 0 {
		if action == "patch" {
			return errorf(http.StatusNotFound, "operation %s not found in catalog %s", op, name)
		}
		status = http.StatusCreated
	}
	if action == "create" {
		status = http.StatusCreated
	}
	if newName != op && prev.Index(newName) >= 0 {
		return &Error{Status: http.StatusConflict, Message: fmt.Sprintf("catalog %s already has an operation %s", name, newName),
			Problems: opsfile.Problems{{Pointer: "/name", Operation: newName, Message: "an operation of this name exists already"}}}
	}
	next := replaceEntry(prev, op, req.entry)
	return g.write(w, r, change{name: name, expect: req.x.against(cur), prev: prev, next: next, action: action, message: req.msg,
		place: catalog.AsEntry(next.Index(newName)), body: req.body}, status)
}

// replaceEntry puts entry where the entry named op is (keeping its
// place), or at the end.
func replaceEntry(d *catalog.Document, op string, entry json.RawMessage) *catalog.Document {
	i := d.Index(op)
	if i < 0 {
		return d.With(entry)
	}
	out := &catalog.Document{Operations: append([]json.RawMessage(nil), d.Operations...), RateLimits: d.RateLimits}
	out.Operations[i] = entry
	return out
}

// patchOperation applies a JSON merge patch (RFC 7386) to an entry.
func patchOperation(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	c, e := readChange(r, args)
	if e != nil {
		return e
	}
	name, op, x, msg := c.name, args[1], c.x, c.msg
	body, e := readBody(r)
	if e != nil {
		return e
	}
	var patch any
	if err := json.Unmarshal(body, &patch); err != nil {
		return &Error{Status: http.StatusBadRequest, Message: "the body is not a JSON merge patch: " + err.Error(),
			Problems: opsfile.Problems{{Message: "a JSON merge patch (RFC 7386) is a JSON object: " + err.Error()}}}
	}
	if _, ok := patch.(map[string]any); !ok {
		return &Error{Status: http.StatusBadRequest, Message: "the body is not a JSON merge patch: it must be a JSON object",
			Problems: opsfile.Problems{{Message: "a JSON merge patch (RFC 7386) is a JSON object"}}}
	}
	_, prev, _, e := g.current(r.Context(), name)
	if e != nil {
		return e
	}
	old := prev.Entry(op)
	if old == nil {
		return errorf(http.StatusNotFound, "operation %s not found in catalog %s", op, name)
	}
	var target any
	_ = json.Unmarshal(old, &target)
	merged, _ := json.Marshal(mergePatch(target, patch))
	entry, probs := catalog.ParseEntry(merged)
	if probs != nil {
		for i := range probs {
			probs[i].Line = 0 // a line of the merged entry, not of the patch
		}
		return &Error{Status: http.StatusBadRequest, Problems: probs,
			Message: fmt.Sprintf("the patched operation is not a valid entry (%d errors); nothing was saved", len(probs))}
	}
	return g.putEntry(w, r, name, op, &entryRequest{x: x, msg: msg, entry: entry}, "patch")
}

// mergePatch applies patch to target as RFC 7386 says.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}

func deleteOperation(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	c, e := readChange(r, args)
	if e != nil {
		return e
	}
	name, op, x, msg := c.name, args[1], c.x, c.msg
	head, prev, _, e := g.current(r.Context(), name)
	if e != nil {
		return e
	}
	if prev.Index(op) < 0 {
		return errorf(http.StatusNotFound, "operation %s not found in catalog %s", op, name)
	}
	if e := x.required(versionOf(head)); e != nil {
		return e
	}
	return g.write(w, r, change{name: name, expect: x.against(versionOf(head)), prev: prev, next: prev.Without(op), action: "delete",
		message: msg, place: catalog.InFile}, http.StatusOK)
}
