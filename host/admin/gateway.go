package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/catalog"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/ratelimit"
	"github.com/crankmcp/crank/store"
)

// Store is what the admin API reads and writes (*store.Etcd is one):
// catalogs and their versions, and live state.
type Store interface {
	catalog.Store
	PutCatalog(ctx context.Context, w store.CatalogWrite) (*store.CatalogHead, error)
	GetCatalog(ctx context.Context, name string) (*store.CatalogHead, *store.CatalogVersion, error)
	GetCatalogHead(ctx context.Context, name string) (*store.CatalogHead, error)
	ListCatalogs(ctx context.Context, after string, limit int) ([]*store.CatalogHead, string, error)
	ListCatalogVersions(ctx context.Context, name string, before int64, limit int) ([]*store.CatalogVersion, int64, error)
	PurgeCatalog(ctx context.Context, name string, expect int64) error

	CountLive(ctx context.Context, workspace string) (store.LiveCounts, error)
	ListMCPSessions(ctx context.Context, workspace, after string, limit int) ([]*store.MCPSession, string, error)
	ListOpenStreamSessions(ctx context.Context, workspace, after string, limit int) ([]*store.StreamSession, string, error)
	ListOpenJobs(ctx context.Context, workspace, after string, limit int) ([]*store.AsyncJobHandle, string, error)
	ReplicaNames(ctx context.Context, owners []string) (map[string]string, error)
	OperatorStreamSession(ctx context.Context, workspace, id string) (*store.StreamSession, error)
	OperatorJob(ctx context.Context, workspace, id string) (*store.AsyncJobHandle, error)
	OperatorMCPSession(ctx context.Context, workspace, digest string) (*store.MCPSession, error)
	DeleteMCPSession(ctx context.Context, id string) error
	CloseStreamSession(ctx context.Context, scope store.Scope, id, reason string) (*store.StreamSession, error)
	CancelJob(ctx context.Context, scope store.Scope, id, reason string) (*store.AsyncJobHandle, error)
	CountUpstreamGrants(ctx context.Context, workspace string) (map[string]int, error)
}

var _ Store = (*store.Etcd)(nil)

// Endpoint is one crank handler of the running config.
type Endpoint interface {
	// Info describes it.
	Info() EndpointInfo
	// Build builds the host the endpoint would serve for doc, a version
	// of its catalog (nil: none) — with its operations files when files
	// is set — without serving it: placeholders expanded as the handler
	// expands them, its adapters (pooled processes), store and quotas.
	Build(ctx context.Context, doc *catalog.Document, files bool) (*host.Host, error)
}

// EndpointInfo describes a crank handler.
type EndpointInfo struct {
	// ID numbers the handler within the running config.
	ID        string   `json:"id"`
	Workspace string   `json:"workspace"`
	Files     []string `json:"operations,omitempty"`
	Catalog   string   `json:"catalog,omitempty"`
	// Serving is its catalog follower's state (nil without a catalog).
	Serving *catalog.Status `json:"serving,omitempty"`
	// Tools counts the tools it serves now.
	Tools int `json:"tools"`
	// View is what its view publishes of them (view.go; nil without one).
	View *EndpointView `json:"view,omitempty"`
}

// Gateway is the running gateway as the admin API sees it, gathered for
// each request (a config reload replaces it).
type Gateway struct {
	// Store is nil until the crank app has started.
	Store     Store
	Endpoints []Endpoint
	// History is how many versions a catalog keeps.
	History int
	// Audit receives an audit record per mutating call and test run.
	Audit *zap.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// RateLimits returns the state of this replica's rate-limit budgets
	// (nil: none).
	RateLimits func() []ratelimit.State
}

// MaxBody bounds a request body.
const MaxBody = 2 << 20

// Error is an admin API failure: a status, a message, and for a refused
// document the problems, each placed at its field, with the warnings. An
// Error without problems, warnings or a current version is the shape of
// Caddy's own admin errors ({"error": "..."}).
type Error struct {
	Status   int              `json:"-"`
	Message  string           `json:"error"`
	Problems opsfile.Problems `json:"errors,omitempty"`
	Warnings opsfile.Problems `json:"warnings,omitempty"`
	// Current is the catalog's current version, for a conflict.
	Current *int64 `json:"current_version,omitempty"`
	// Header names the request header a precondition error is about.
	Header string `json:"header,omitempty"`
	Err    error  `json:"-"`
}

func (e *Error) Error() string { return e.Message }

// Plain reports whether the error carries nothing beyond a status and a
// message.
func (e *Error) Plain() bool {
	return len(e.Problems) == 0 && len(e.Warnings) == 0 && e.Current == nil && e.Header == ""
}

func errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// storeError maps a store failure to a status.
func storeError(err error, what string) *Error {
	var ce *store.CatalogConflictError
	var tl *store.TooLargeError
	switch {
	case errors.As(err, &ce):
		cur := ce.Current
		e := &Error{Status: http.StatusConflict, Message: strings.TrimPrefix(ce.Error(), "store: ") +
			"; read the current version and apply your change to it", Current: &cur, Header: "If-Match"}
		return e
	case errors.As(err, &tl):
		return &Error{Status: http.StatusRequestEntityTooLarge, Message: strings.TrimPrefix(tl.Error(), "store: "), Err: err}
	case errors.Is(err, store.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Message: what + " not found", Err: err}
	case errors.Is(err, store.ErrInvalid):
		return &Error{Status: http.StatusBadRequest, Message: strings.TrimPrefix(err.Error(), "store: "), Err: err}
	case errors.Is(err, store.ErrUnavailable):
		return &Error{Status: http.StatusServiceUnavailable, Message: "the state store (etcd) is unavailable; retry shortly: " + err.Error(), Err: err}
	case errors.Is(err, store.ErrNoSpace):
		return &Error{Status: http.StatusInsufficientStorage, Message: "the state store (etcd) is out of space and refuses writes until space is recovered", Err: err}
	case errors.Is(err, store.ErrConflict):
		return &Error{Status: http.StatusConflict, Message: "a concurrent change won; retry: " + err.Error(), Err: err}
	}
	return &Error{Status: http.StatusInternalServerError, Message: what + ": " + err.Error(), Err: err}
}

// ServeHTTP serves the admin API's /crank/ routes (docs/admin-api.md).
// Failures come back as *Error for the caller to write.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	segs := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/crank"), "/"), "/")
	if g.Store == nil && !(len(segs) == 1 && segs[0] == "endpoints") && segs[0] != "schema" {
		return &Error{Status: http.StatusServiceUnavailable, Message: "the crank app has not started (no crank handler in the running config, or the config is still loading)"}
	}
	route, args := match(segs)
	if route == nil {
		return errorf(http.StatusNotFound, "no admin route %s (see docs/admin-api.md)", r.URL.Path)
	}
	h := route[r.Method]
	if h == nil {
		return errorf(http.StatusMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path)
	}
	err := h(g, w, r, args)
	if err != nil && r.Method != http.MethodGet {
		// A refused change is audited too (a written one is audited
		// where it is written).
		status := http.StatusInternalServerError
		var e *Error
		if errors.As(err, &e) {
			status = e.Status
		}
		g.audit(r, "admin.refused", "", err, zap.Int("status", status))
	}
	return err
}

type handlerFunc func(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error

type methods map[string]handlerFunc

// routes maps path patterns ("*" is one segment) to their methods.
var routes = []struct {
	pattern []string
	m       methods
}{
	{[]string{"catalogs"}, methods{"GET": listCatalogs}},
	{[]string{"catalogs", "*"}, methods{"GET": getCatalog, "PUT": putCatalog, "DELETE": deleteCatalog}},
	{[]string{"catalogs", "*", "validate"}, methods{"POST": validateCatalog}},
	{[]string{"catalogs", "*", "operations"}, methods{"GET": listOperations, "POST": createOperation}},
	{[]string{"catalogs", "*", "operations", "*"}, methods{"GET": getOperation, "PUT": replaceOperation,
		"PATCH": patchOperation, "DELETE": deleteOperation}},
	{[]string{"catalogs", "*", "versions"}, methods{"GET": listVersions}},
	{[]string{"catalogs", "*", "versions", "*"}, methods{"GET": getVersion}},
	{[]string{"catalogs", "*", "diff"}, methods{"GET": diffVersions}},
	{[]string{"catalogs", "*", "rollback"}, methods{"POST": rollback}},
	{[]string{"catalogs", "*", "test"}, methods{"POST": testRun}},
	{[]string{"endpoints"}, methods{"GET": listEndpoints}},
	{[]string{"tools"}, methods{"GET": listTools}},
	{[]string{"tools", "*", "call"}, methods{"POST": callTool}},
	{[]string{"catalogs", "*", "rate_limits"}, methods{"GET": listCatalogRateLimits, "PUT": putCatalogRateLimits}},
	{[]string{"schema", "operation"}, methods{"GET": operationSchema}},
	{[]string{"schema", "rate_limit"}, methods{"GET": rateLimitSchema}},
	{[]string{"rate-limits"}, methods{"GET": liveRateLimits}},
	{[]string{"live", "*"}, methods{"GET": liveSummary}},
	{[]string{"live", "*", "*"}, methods{"GET": liveList}},
	{[]string{"live", "*", "*", "*"}, methods{"DELETE": liveStop}},
	{[]string{"upstream-grants"}, methods{"GET": listUpstreamGrants}},
	{[]string{"upstream-grants", "*", "*"}, methods{"DELETE": revokeUpstreamGrant}},
}

func match(segs []string) (methods, []string) {
	for _, rt := range routes {
		if len(rt.pattern) != len(segs) {
			continue
		}
		var args []string
		ok := true
		for i, p := range rt.pattern {
			if p == "*" {
				if segs[i] == "" {
					ok = false
					break
				}
				args = append(args, segs[i])
			} else if p != segs[i] {
				ok = false
				break
			}
		}
		if ok {
			return rt.m, args
		}
	}
	return nil, nil
}

func (g *Gateway) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// readBody reads a request body of at most MaxBody bytes.
func readBody(r *http.Request) ([]byte, *Error) {
	if r.ContentLength > MaxBody {
		return nil, errorf(http.StatusRequestEntityTooLarge, "the request body is %d bytes, over the %d-byte limit", r.ContentLength, MaxBody)
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "reading the request body: %v", err)
	}
	if len(data) > MaxBody {
		return nil, errorf(http.StatusRequestEntityTooLarge, "the request body is over the %d-byte limit", MaxBody)
	}
	return data, nil
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteError writes e as the admin API's error body.
func WriteError(w http.ResponseWriter, e *Error) {
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	_ = writeJSON(w, e.Status, e)
}

// expectation is a request's precondition on the catalog's version:
// If-Match: "<v>" (or *) or If-None-Match: *.
type expectation struct {
	set     bool
	version int64 // store.AnyVersion for If-Match: *; 0 for If-None-Match: *
}

func precondition(r *http.Request) (expectation, *Error) {
	if inm := strings.TrimSpace(r.Header.Get("If-None-Match")); inm != "" {
		if inm != "*" {
			return expectation{}, &Error{Status: http.StatusBadRequest, Header: "If-None-Match",
				Message: `If-None-Match: only * (create a catalog that does not exist) is understood`}
		}
		return expectation{set: true, version: 0}, nil
	}
	im := strings.TrimSpace(r.Header.Get("If-Match"))
	if im == "" {
		return expectation{}, nil
	}
	if im == "*" {
		return expectation{set: true, version: store.AnyVersion}, nil
	}
	v, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(im, "W/"), `"`), 10, 64)
	if err != nil || v < 0 {
		return expectation{}, &Error{Status: http.StatusBadRequest, Header: "If-Match",
			Message: fmt.Sprintf(`If-Match: %q is not a catalog version: send the ETag of the version you read, such as "3"`, im)}
	}
	return expectation{set: true, version: v}, nil
}

// changeReq is what every change request says: the catalog, the
// version it applies to, and a message.
type changeReq struct {
	name string
	x    expectation
	msg  string
}

func readChange(r *http.Request, args []string) (*changeReq, *Error) {
	if e := catalogName(args[0]); e != nil {
		return nil, e
	}
	x, e := precondition(r)
	if e != nil {
		return nil, e
	}
	msg, e := message(r)
	if e != nil {
		return nil, e
	}
	return &changeReq{name: args[0], x: x, msg: msg}, nil
}

// required refuses a change made without saying which version it
// applies to.
func (x expectation) required(cur int64) *Error {
	if x.set {
		return nil
	}
	return &Error{Status: http.StatusPreconditionRequired, Header: "If-Match", Current: &cur,
		Message: fmt.Sprintf(`say which version this change applies to: If-Match: "%d" (the ETag of the version you read; "*" overwrites whatever is current)`, cur)}
}

// against is the version a read-modify-write expects: the one the
// client named, or for If-Match: * the one just read (so a concurrent
// change is never lost, even to a blind write).
func (x expectation) against(read int64) int64 {
	if x.version == store.AnyVersion {
		return read
	}
	return x.version
}

func etag(v int64) string { return fmt.Sprintf(`"%d"`, v) }

// caller is who makes a request: the console's caller (WithCaller),
// Caddy's admin identity (the client certificate of remote admin access)
// or "admin" for the local endpoint;
// operator is the name the client gave in X-Crank-Operator (a claim).
func caller(r *http.Request) (who, operator string) {
	who = "admin"
	if c := CallerOf(r.Context()); c != "" {
		who = c
	} else if r.TLS != nil {
		for _, chain := range r.TLS.VerifiedChains {
			if len(chain) > 0 {
				c := chain[0]
				name := c.Subject.CommonName
				if name == "" {
					name = c.SerialNumber.String()
				}
				who = "admin-cert:" + name
				break
			}
		}
	}
	operator = r.Header.Get("X-Crank-Operator")
	if len(operator) > 128 {
		operator = operator[:128]
	}
	return who, strings.ToValidUTF8(operator, "?")
}

// queryInt reads an integer query parameter within [lo, hi] (def when
// absent).
func queryInt(r *http.Request, name string, def, lo, hi int64) (int64, *Error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, errorf(http.StatusBadRequest, "query parameter %s: must be an integer from %d to %d, got %q", name, lo, hi, s)
	}
	return v, nil
}

func queryBool(r *http.Request, name string) bool {
	v, _ := strconv.ParseBool(r.URL.Query().Get(name))
	return v
}

// message is a change's message (query parameter message, at most 1 KiB).
func message(r *http.Request) (string, *Error) {
	m := r.URL.Query().Get("message")
	if len(m) > 1024 {
		return "", errorf(http.StatusBadRequest, "query parameter message: at most 1024 bytes")
	}
	return m, nil
}

func listEndpoints(g *Gateway, w http.ResponseWriter, _ *http.Request, _ []string) error {
	out := []EndpointInfo{}
	for _, ep := range g.Endpoints {
		out = append(out, ep.Info())
	}
	return writeJSON(w, http.StatusOK, map[string]any{"endpoints": out})
}
