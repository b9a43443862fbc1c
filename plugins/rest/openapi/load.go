package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	yaml "go.yaml.in/yaml/v3"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// Bounds of an OpenAPI document.
const (
	maxDocumentBytes     = 32 << 20
	defaultFetchTimeout  = 30 * time.Second
	maxExternalRefFiles  = 256
	maxDocumentRefsWalks = 1 << 20
)

// httpMethods are the operation keys of a path item, in the order tools
// are listed.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace", "query"}

// docProblem is something wrong with one part of a document, located by
// its JSON pointer (RFC 6901, written as a URI fragment: "#/paths/~1pets").
type docProblem struct {
	pointer string
	msg     string
	// op names the operation left out ("GET /pets"), if any.
	op string
}

func (p docProblem) String() string { return p.pointer + ": " + p.msg }

// loadedDoc is an OpenAPI document ready to import.
type loadedDoc struct {
	doc *openapi3.T
	// version is "2.0", "3.0", "3.1" or "3.2", as declared.
	version string
	// skipped are the operations left out because a part they need is
	// unusable, with why; doc is nil when no operation is left.
	skipped []docProblem
	// opPointer maps "METHOD path" to the operation's pointer in the
	// document as written ("*path" to a path item written as a $ref).
	opPointer map[string]string
	// lenient says which quirks were read as the vendor meant them
	// (readLeniently), "" when none.
	lenient string
}

// docSource is where a document comes from.
type docSource struct {
	// data is the document as read; location its file:// or http(s) URL
	// (relative $refs resolve against it).
	data     []byte
	location *url.URL
	remote   bool
}

// readDocument reads the document named by cfg.document: a file (relative
// to the operations file) or an http(s) URL.
func (im *importer) readDocument(ctx context.Context) (*docSource, error) {
	cfg, op := im.cfg, im.op
	if cfg.documentURL != nil {
		ctx, cancel := context.WithTimeout(ctx, cfg.fetchTimeout(op.Timeout))
		defer cancel()
		data, err := im.fetchURL(ctx, cfg.documentURL)
		if err != nil {
			return nil, err
		}
		return &docSource{data: data, location: cfg.documentURL, remote: true}, nil
	}
	path := op.ResolvePath(cfg.document)
	data, err := readFileBounded(path)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return &docSource{data: data, location: &url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}}, nil
}

func readFileBounded(path string) ([]byte, error) {
	data, err := sdk.ReadFile(path, maxDocumentBytes)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", path, err)
	}
	return data, nil
}

// safeURL renders u without userinfo, query or fragment, for messages.
func safeURL(u *url.URL) string {
	v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return v.String()
}

// fetchURL reads a document or an external $ref from an http(s) URL,
// following redirects within its origin only.
func (im *importer) fetchURL(ctx context.Context, u *url.URL) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("cannot fetch %s: invalid URL", safeURL(u))
	}
	req.Header.Set("Accept", "application/json, application/yaml;q=0.9, */*;q=0.5")
	req.Header.Set("User-Agent", im.t.UserAgent)
	client := &http.Client{Transport: im.t.Client.Transport, CheckRedirect: httpadapter.SameOriginRedirects}
	resp, err := client.Do(req)
	if err != nil {
		reason := "the request failed"
		var ue *url.Error
		var re *httpadapter.RedirectError
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			reason = "no answer in time"
		case errors.As(err, &re):
			reason = re.Error() // origins only: the url.Error quotes the redirect's target whole
		case errors.As(err, &ue):
			reason = describeNetError(ue.Err)
		}
		return nil, fmt.Errorf("cannot fetch %s: %s", safeURL(u), reason)
	}
	defer httpadapter.DrainAndClose(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("cannot fetch %s: it answered %s", safeURL(u), resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cannot fetch %s: reading the answer failed", safeURL(u))
	}
	if len(data) > maxDocumentBytes {
		return nil, fmt.Errorf("%s is larger than %d MiB", safeURL(u), maxDocumentBytes>>20)
	}
	return data, nil
}

// describeNetError names a transport failure without quoting addresses
// from the config.
func describeNetError(err error) string {
	if httpadapter.Refused(err) {
		return httpadapter.ErrorText(err) // names the host and address dialled, no path
	}
	s := err.Error()
	for _, k := range []string{"connection refused", "no such host", "connection reset", "i/o timeout", "certificate", "tls"} {
		if strings.Contains(s, k) {
			return k
		}
	}
	return "the connection failed"
}

// loadDocument parses a document, sets aside the operations it cannot use
// (each reported with the pointer of the bad part), keeps only what the
// selected operations need and loads the rest with kin-openapi.
func (im *importer) loadDocument(ctx context.Context, src *docSource, timeout time.Duration) (*loadedDoc, *docProblem) {
	cfg := im.cfg
	tree, err := parseTree(src.data)
	if err != nil {
		return nil, &docProblem{pointer: "#", msg: err.Error()}
	}
	root, ok := tree.(map[string]any)
	if !ok {
		return nil, &docProblem{pointer: "#", msg: "an OpenAPI document is an object"}
	}
	ld := &loadedDoc{opPointer: map[string]string{}}
	v2 := false
	switch {
	case root["swagger"] != nil:
		if s, _ := root["swagger"].(string); s != "2.0" {
			return nil, &docProblem{pointer: "#/swagger", msg: `unsupported version: "swagger" must be "2.0"`}
		}
		ld.version, v2 = "2.0", true
	case root["openapi"] != nil:
		s, _ := root["openapi"].(string)
		switch {
		case strings.HasPrefix(s, "3.0."), s == "3.0":
			ld.version = "3.0"
		case strings.HasPrefix(s, "3.1."), s == "3.1":
			ld.version = "3.1"
		case strings.HasPrefix(s, "3.2."), s == "3.2":
			ld.version = "3.2"
		default:
			return nil, &docProblem{pointer: "#/openapi", msg: "unsupported OpenAPI version (supported: 2.0, 3.0.x, 3.1.x, 3.2.x partially)"}
		}
	default:
		return nil, &docProblem{pointer: "#", msg: `not an OpenAPI document: it has neither "openapi" nor "swagger"`}
	}
	paths, ok := root["paths"].(map[string]any)
	if !ok {
		if root["paths"] == nil {
			return nil, &docProblem{pointer: "#/paths", msg: "the document has no paths: there are no operations to import"}
		}
		return nil, &docProblem{pointer: "#/paths", msg: "must be an object {path: path item}"}
	}

	ld.lenient = readLeniently(root, ld.version)
	sc := newScan(root, cfg.allowExternalRefs)
	sc.walk(root, "#")

	// Select operations: well-formed, matching the filters, with every
	// $ref they reach usable.
	pathKeys := slices.Sorted(maps.Keys(paths))
	removed := map[string]bool{} // operation pointers taken out of the tree
	for _, p := range pathKeys {
		pptr := "#/paths/" + escapePointer(p)
		item, ok := paths[p].(map[string]any)
		if !ok {
			ld.skipped = append(ld.skipped, docProblem{pptr, "a path item must be an object", "at " + p})
			delete(paths, p)
			continue
		}
		if !strings.HasPrefix(p, "/") {
			ld.skipped = append(ld.skipped, docProblem{pptr, "a path must start with /", "at " + p})
			delete(paths, p)
			continue
		}
		if _, isRef := item["$ref"]; isRef {
			// A path item by reference: its operations live elsewhere.
			if prob := sc.reachProblem([]string{pptr}, nil); prob != nil {
				ld.skipped = append(ld.skipped, docProblem{pptr, "unusable: " + prob.String(), "at " + p})
				delete(paths, p)
			} else if !cfg.pathItemRefMayMatch(p) {
				delete(paths, p)
			} else {
				ld.opPointer["*"+p] = pptr
			}
			continue
		}
		// The path item's own parts (parameters, servers) that every
		// operation uses.
		var shared []string
		for k := range item {
			if !slices.Contains(httpMethods, strings.ToLower(k)) {
				shared = append(shared, pptr+"/"+escapePointer(k))
			}
		}
		left := 0
		for _, k := range slices.Sorted(maps.Keys(item)) {
			m := strings.ToLower(k)
			if !slices.Contains(httpMethods, m) {
				continue
			}
			optr := pptr + "/" + escapePointer(k)
			opObj, ok := item[k].(map[string]any)
			if !ok {
				ld.skipped = append(ld.skipped, docProblem{optr, "an operation must be an object", strings.ToUpper(m) + " " + p})
				delete(item, k)
				removed[optr] = true
				continue
			}
			if !cfg.rawMatch(p, m, opObj) {
				delete(item, k)
				removed[optr] = true
				continue
			}
			if prob := sc.reachProblem(append([]string{optr}, shared...), removed); prob != nil {
				ld.skipped = append(ld.skipped, docProblem{optr, "unusable: " + prob.String(), strings.ToUpper(m) + " " + p})
				delete(item, k)
				removed[optr] = true
				continue
			}
			if err := checkOperationShape(opObj, v2); err != nil {
				ld.skipped = append(ld.skipped, docProblem{optr, err.Error(), strings.ToUpper(m) + " " + p})
				delete(item, k)
				removed[optr] = true
				continue
			}
			ld.opPointer[strings.ToUpper(m)+" "+p] = optr
			left++
		}
		if left == 0 {
			delete(paths, p)
		}
	}
	if len(paths) == 0 {
		return ld, nil
	}

	// Keep only the components the kept operations reach: a broken or
	// unsupported part that nothing imported uses stays out of the way.
	var regions []string
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		regions = append(regions, "#/paths/"+escapePointer(p))
	}
	reached := sc.reach(regions)
	pruneComponents(root, reached, v2)
	delete(root, "webhooks")

	clean, err := json.Marshal(root)
	if err != nil {
		return nil, &docProblem{pointer: "#", msg: "cannot re-encode the document: " + err.Error()}
	}
	loader := openapi3.NewLoader()
	loader.Context = ctx
	loader.IsExternalRefsAllowed = cfg.allowExternalRefs
	loader.ReadFromURIFunc = im.refReader(ctx, src, timeout)
	var doc *openapi3.T
	if v2 {
		var d2 openapi2.T
		if err := json.Unmarshal(clean, &d2); err != nil {
			return nil, &docProblem{pointer: "#", msg: "not a valid Swagger 2.0 document: " + err.Error()}
		}
		doc, err = openapi2conv.ToV3WithLoader(&d2, loader, src.location)
		if err != nil {
			return nil, &docProblem{pointer: "#", msg: "cannot convert the Swagger 2.0 document to OpenAPI 3: " + err.Error()}
		}
	} else if !cfg.allowExternalRefs {
		// The document is JSON of our own making and refers to nothing
		// outside itself: decoded as JSON, not through kin-openapi's YAML
		// reader (a third of a large document's load).
		doc = &openapi3.T{}
		if err := json.Unmarshal(clean, doc); err != nil {
			return nil, &docProblem{pointer: "#", msg: "cannot load the document: " + err.Error()}
		}
		if err := loader.ResolveRefsIn(doc, src.location); err != nil {
			return nil, &docProblem{pointer: "#", msg: "cannot load the document: " + err.Error()}
		}
	} else {
		doc, err = loader.LoadFromDataWithPath(clean, src.location)
		if err != nil {
			return nil, &docProblem{pointer: "#", msg: "cannot load the document: " + err.Error()}
		}
	}
	ld.doc = doc
	return ld, nil
}

// parseTree decodes a JSON or YAML (1.2: "y" and "on" stay strings)
// document into maps, slices and scalars.
func parseTree(data []byte) (any, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		var tree any
		if err := dec.Decode(&tree); err != nil {
			return nil, fmt.Errorf("not valid JSON: %v", err)
		}
		return tree, nil
	}
	var tree any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		return nil, fmt.Errorf("not valid YAML or JSON: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return normalizeYAML(tree)
}

// normalizeYAML gives a decoded YAML tree JSON's shape: string keys (a
// response code written 200 is the key "200").
func normalizeYAML(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			n, err := normalizeYAML(e)
			if err != nil {
				return nil, err
			}
			t[k] = n
		}
		return t, nil
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			n, err := normalizeYAML(e)
			if err != nil {
				return nil, err
			}
			m[fmt.Sprint(k)] = n
		}
		return m, nil
	case []any:
		for i, e := range t {
			n, err := normalizeYAML(e)
			if err != nil {
				return nil, err
			}
			t[i] = n
		}
		return t, nil
	case time.Time:
		// YAML reads an unquoted date as a timestamp: give its text back.
		if t.Hour() == 0 && t.Minute() == 0 && t.Second() == 0 && t.Nanosecond() == 0 && t.Location() == time.UTC {
			return t.Format(time.DateOnly), nil
		}
		return t.Format(time.RFC3339Nano), nil
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return nil, errors.New("not usable: the document holds an infinite or NaN number")
		}
	}
	return v, nil
}

// refReader reads external $refs when allowed: files and URLs for a file
// document, URLs only for a document fetched from a URL.
func (im *importer) refReader(ctx context.Context, src *docSource, timeout time.Duration) openapi3.ReadFromURIFunc {
	cfg := im.cfg
	n := 0
	return func(_ *openapi3.Loader, u *url.URL) ([]byte, error) {
		if !cfg.allowExternalRefs {
			return nil, errors.New("external $refs are off (set openapi.allow_external_refs)")
		}
		n++
		if n > maxExternalRefFiles {
			return nil, fmt.Errorf("more than %d external documents", maxExternalRefFiles)
		}
		switch u.Scheme {
		case "http", "https":
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return im.fetchURL(ctx, u)
		case "", "file":
			if src.remote {
				return nil, errors.New("a document fetched from a URL cannot refer to local files")
			}
			return readFileBounded(filepath.FromSlash(u.Path))
		}
		return nil, fmt.Errorf("unsupported $ref scheme %q", u.Scheme)
	}
}

// checkOperationShape decodes one operation alone, so that a malformed
// operation is reported (and skipped) rather than failing the document.
func checkOperationShape(op map[string]any, v2 bool) error {
	b, err := json.Marshal(op)
	if err != nil {
		return err
	}
	if v2 {
		var o openapi2.Operation
		err = json.Unmarshal(b, &o)
	} else {
		var o openapi3.Operation
		err = json.Unmarshal(b, &o)
	}
	if err != nil {
		return fmt.Errorf("malformed operation: %v", err)
	}
	return nil
}

// pruneComponents drops the reusable parts no kept operation reaches.
// Security schemes are kept: operations name them, not $ref them.
func pruneComponents(root map[string]any, reached map[string]bool, v2 bool) {
	keep := func(sectionPtr string, section map[string]any) {
		for name := range section {
			if !reached[sectionPtr+"/"+escapePointer(name)] {
				delete(section, name)
			}
		}
	}
	if v2 {
		for _, s := range []string{"definitions", "parameters", "responses"} {
			if sec, ok := root[s].(map[string]any); ok {
				keep("#/"+s, sec)
			}
		}
		return
	}
	comps, ok := root["components"].(map[string]any)
	if !ok {
		return
	}
	for s, v := range comps {
		if s == "securitySchemes" {
			continue
		}
		if sec, ok := v.(map[string]any); ok {
			keep("#/components/"+escapePointer(s), sec)
		}
	}
}

// scan indexes the $refs of a document tree.
type scan struct {
	root          any
	allowExternal bool
	// suspect: some $ref may be unusable (dangling, external while those
	// are off, or into paths); otherwise reachProblem has nothing to find.
	suspect bool
	// refs are the objects holding a $ref, sorted by pointer.
	refs []refSite
}

type refSite struct {
	at     string // pointer of the object holding $ref
	target string // the $ref as written
}

func newScan(root any, allowExternal bool) *scan {
	return &scan{root: root, allowExternal: allowExternal}
}

func (s *scan) walk(v any, ptr string) {
	switch t := v.(type) {
	case map[string]any:
		if r, ok := t["$ref"].(string); ok {
			s.refs = append(s.refs, refSite{at: ptr, target: r})
		}
		// A discriminator's mapping names schemas by $ref too (kin-openapi
		// resolves them): what it names is reached.
		if d, ok := t["discriminator"].(map[string]any); ok {
			if m, ok := d["mapping"].(map[string]any); ok {
				for k, v := range m {
					if r, ok := v.(string); ok && strings.HasPrefix(r, "#/") {
						s.refs = append(s.refs, refSite{at: ptr + "/discriminator/mapping/" + escapePointer(k), target: r})
					}
				}
			}
		}
		for k, e := range t {
			s.walk(e, ptr+"/"+escapePointer(k))
		}
	case []any:
		for i, e := range t {
			s.walk(e, ptr+"/"+strconv.Itoa(i))
		}
	}
	if ptr == "#" {
		sort.Slice(s.refs, func(i, j int) bool { return s.refs[i].at < s.refs[j].at })
		for _, site := range s.refs {
			switch {
			case !strings.HasPrefix(site.target, "#"):
				s.suspect = s.suspect || !s.allowExternal
			case strings.HasPrefix(site.target, "#/paths/"):
				s.suspect = true
			default:
				if _, ok := resolvePointer(s.root, normalizeFragment(site.target)); !ok {
					s.suspect = true
				}
			}
		}
	}
}

// within returns the ref sites inside the region at ptr.
func (s *scan) within(ptr string) []refSite {
	i := sort.Search(len(s.refs), func(i int) bool { return s.refs[i].at >= ptr })
	var out []refSite
	for ; i < len(s.refs); i++ {
		at := s.refs[i].at
		if at != ptr && !strings.HasPrefix(at, ptr+"/") {
			if strings.HasPrefix(at, ptr) {
				continue // a sibling such as "/pets2" after "/pets"
			}
			break
		}
		out = append(out, s.refs[i])
	}
	return out
}

// componentRoot maps a pointer inside a reusable part to the part itself
// ("#/components/schemas/Pet/properties/id" → "#/components/schemas/Pet").
func componentRoot(ptr string) string {
	parts := strings.Split(ptr, "/")
	switch {
	case len(parts) >= 4 && parts[1] == "components":
		return strings.Join(parts[:4], "/")
	case len(parts) >= 3 && (parts[1] == "definitions" || parts[1] == "parameters" || parts[1] == "responses"):
		return strings.Join(parts[:3], "/")
	case len(parts) >= 3 && parts[1] == "paths":
		return strings.Join(parts[:3], "/")
	}
	return ptr
}

// reach returns the regions (and their component roots) reachable from
// the given ones through local $refs.
func (s *scan) reach(from []string) map[string]bool {
	seen := map[string]bool{}
	stack := append([]string(nil), from...)
	for len(stack) > 0 && len(seen) < maxDocumentRefsWalks {
		r := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[r] {
			continue
		}
		seen[r] = true
		seen[componentRoot(r)] = true
		for _, site := range s.within(r) {
			if strings.HasPrefix(site.target, "#") {
				t := normalizeFragment(site.target)
				if !seen[t] {
					stack = append(stack, t, componentRoot(t))
				}
			}
		}
	}
	return seen
}

// reachProblem returns the first unusable $ref the regions reach, nil if
// none: a $ref that resolves to nothing, a remote one while those are off,
// or one into an operation taken out.
func (s *scan) reachProblem(from []string, removed map[string]bool) *docProblem {
	if !s.suspect {
		return nil
	}
	seen := map[string]bool{}
	stack := append([]string(nil), from...)
	for len(stack) > 0 && len(seen) < maxDocumentRefsWalks {
		r := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[r] {
			continue
		}
		seen[r] = true
		for _, site := range s.within(r) {
			if !strings.HasPrefix(site.target, "#") {
				if !s.allowExternal {
					return &docProblem{pointer: site.at + "/$ref", msg: fmt.Sprintf("$ref %q points outside the document and external $refs are off (set openapi.allow_external_refs)", site.target)}
				}
				continue
			}
			t := normalizeFragment(site.target)
			if _, ok := resolvePointer(s.root, t); !ok {
				return &docProblem{pointer: site.at + "/$ref", msg: fmt.Sprintf("$ref %q does not resolve to anything in the document", site.target)}
			}
			for rm := range removed {
				if t == rm || strings.HasPrefix(t, rm+"/") {
					return &docProblem{pointer: site.at + "/$ref", msg: fmt.Sprintf("$ref %q points into an operation that is not imported", site.target)}
				}
			}
			if !seen[t] {
				stack = append(stack, t)
			}
		}
	}
	return nil
}

// normalizeFragment turns a $ref fragment into the "#/a/b" form used for
// regions (percent-decoding it, as a URI fragment may be).
func normalizeFragment(ref string) string {
	frag := strings.TrimPrefix(ref, "#")
	if u, err := url.PathUnescape(frag); err == nil {
		frag = u
	}
	if frag == "" {
		return "#"
	}
	return "#" + frag
}

// resolvePointer follows a "#/a/b" pointer in the tree.
func resolvePointer(root any, ptr string) (any, bool) {
	if ptr == "#" {
		return root, true
	}
	if !strings.HasPrefix(ptr, "#/") {
		return nil, false
	}
	cur := root
	for _, tok := range strings.Split(ptr[2:], "/") {
		tok = unescapePointer(tok)
		switch t := cur.(type) {
		case map[string]any:
			v, ok := t[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) {
				return nil, false
			}
			cur = t[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// escapePointer escapes one JSON pointer token (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func unescapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}
