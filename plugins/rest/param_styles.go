package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/oapi-codegen/runtime"

	"github.com/crankmcp/crank/plugins/rest/openapi"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// Where an argument is sent: a location of openapi.StylesIn.
const (
	locPath   = "path"
	locQuery  = "query"
	locHeader = "header"
)

// paramStyleField is one argument's param_styles entry as written.
type paramStyleField struct {
	Style         string `json:"style" jsonschema:"The OpenAPI style: path simple, label, matrix; query form, spaceDelimited, pipeDelimited, deepObject; header simple; json anywhere."`
	Explode       *bool  `json:"explode,omitempty" jsonschema:"OpenAPI explode; default true for form and deepObject, false otherwise."`
	AllowReserved bool   `json:"allow_reserved,omitempty" jsonschema:"Query only: leave reserved characters unescaped."`
}

// paramStyle is how one argument is serialized into the path, query or
// header it fills (config field param_styles), following the OpenAPI
// style and explode rules; github.com/oapi-codegen/runtime does the
// serialization.
type paramStyle struct {
	style         string
	explode       bool
	allowReserved bool
	loc           string
	rloc          runtime.ParamLocation
}

// parseParamStyles reads param_styles: {argument: {style, explode,
// allow_reserved}}. It runs after url, query and header_args, which say
// where each argument goes.
func parseParamStyles(styles map[string]paramStyleField, op *operation, d *diags) {
	for _, arg := range sortedKeys(styles) {
		field := "param_styles." + arg
		spec := styles[arg]
		var locs []string
		for _, p := range op.path {
			if p.param == arg && !contains(locs, locPath) {
				locs = append(locs, locPath)
			}
		}
		for _, q := range op.query {
			if q.arg == arg && !contains(locs, locQuery) {
				locs = append(locs, locQuery)
			}
		}
		for _, h := range op.headerArgs {
			if h.arg == arg && !contains(locs, locHeader) {
				locs = append(locs, locHeader)
			}
		}
		if len(locs) != 1 {
			if len(locs) == 0 {
				d.Errorf(field, "argument %q fills no path parameter, query parameter or header_args header", arg)
			} else {
				d.Errorf(field, "argument %q fills several parameters (%s): a styled argument fills exactly one", arg, strings.Join(locs, ", "))
			}
			continue
		}
		st := &paramStyle{loc: locs[0]}
		switch st.loc {
		case locPath:
			st.rloc = runtime.ParamLocationPath
		case locQuery:
			st.rloc = runtime.ParamLocationQuery
		default:
			st.rloc = runtime.ParamLocationHeader
		}
		allowed := openapi.StylesIn[st.loc]
		if st.style = spec.Style; !contains(allowed, st.style) {
			d.Errorf(field+".style", "required for a %s parameter: one of %s", st.loc, strings.Join(allowed, ", "))
			continue
		}
		st.explode = st.style == openapi.StyleForm || st.style == openapi.StyleDeepObject
		if spec.Explode != nil {
			st.explode = *spec.Explode
		}
		if st.style == openapi.StyleDeepObject && !st.explode {
			d.Errorf(field+".explode", "style deepObject is always exploded")
		}
		if st.allowReserved = spec.AllowReserved; st.allowReserved && st.loc != locQuery {
			d.Errorf(field+".allow_reserved", "only applies to query parameters")
		}
		if op.styles == nil {
			op.styles = map[string]*paramStyle{}
		}
		op.styles[arg] = st
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// styledPath serializes the argument filling a path parameter when it has
// a style; styled is false when it has none (the plain rules apply).
func (op *operation) styledPath(arg string, v json.RawMessage) (s string, styled bool, ue *sdk.UpstreamError) {
	st := op.styles[arg]
	if st == nil {
		return "", false, nil
	}
	s, err := st.serialize(arg, v)
	if err != nil {
		return "", true, op.invalidArg("argument %q fills the path parameter {%s}: %v", arg, arg, err)
	}
	if s == "" {
		return "", true, op.invalidArg("argument %q fills the path parameter {%s} and must not serialize to %q", arg, arg, s)
	}
	if hasDotSegment(s) {
		return "", true, op.dotSegment(arg)
	}
	return s, true, nil
}

// styledQuery serializes the argument of a query parameter when it has a
// style: the "name=value" pairs joined by '&', already escaped ("" adds
// nothing).
func (op *operation) styledQuery(q queryParam, v json.RawMessage) (s string, styled bool, ue *sdk.UpstreamError) {
	st := op.styles[q.arg]
	if st == nil {
		return "", false, nil
	}
	s, err := st.serialize(q.name, v)
	if err != nil {
		return "", true, op.invalidArg("argument %q (query parameter %s): %v", q.arg, q.name, err)
	}
	return s, true, nil
}

// styledHeader serializes the argument of a header when it has a style.
func (op *operation) styledHeader(h headerArg, v json.RawMessage) (s string, styled bool, ue *sdk.UpstreamError) {
	st := op.styles[h.arg]
	if st == nil {
		return "", false, nil
	}
	s, err := st.serialize(h.name, v)
	if err != nil {
		return "", true, op.invalidArg("argument %q (header %s): %v", h.arg, h.name, err)
	}
	if !httpadapter.ValidHeaderValue(s) {
		return "", true, op.invalidArg("argument %q (header %s) contains a control character such as a line break", h.arg, h.name)
	}
	return s, true, nil
}

// serialize renders a (non-null) argument value as the parameter name.
func (st *paramStyle) serialize(name string, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if st.style == openapi.StyleJSON {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return "", fmt.Errorf("not valid JSON")
		}
		switch st.loc {
		case locPath:
			return url.PathEscape(b.String()), nil
		case locQuery:
			return url.QueryEscape(name) + "=" + url.QueryEscape(b.String()), nil
		}
		return b.String(), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("not valid JSON")
	}
	if st.style == openapi.StyleDeepObject {
		// Objects, lists and scalars in the bracket convention that qs,
		// Rails, PHP and Stripe (stripe-mock) read: a[b]=v, a[]=v for a
		// list (expand[]=x), a=v for a scalar (body_format.go).
		var fe formEncoder
		if err := fe.brackets(name, v, 0); err != nil {
			return "", err
		}
		out := fe.String(true)
		if st.allowReserved {
			out = keepReserved(out)
		}
		return out, nil
	}
	switch t := v.(type) {
	case []any:
		list := make([]any, 0, len(t))
		for _, e := range t {
			if e == nil {
				continue // nulls are skipped, as in a plain query list
			}
			if !isScalar(e) {
				return "", fmt.Errorf("style %s serializes a list of strings, numbers or booleans only", st.style)
			}
			list = append(list, e)
		}
		v = list
	case map[string]any:
		if st.style == openapi.StyleSpaceDelimited || st.style == openapi.StylePipeDelimited {
			return "", fmt.Errorf("style %s serializes a list, not an object", st.style)
		}
		{
			// Keys are written as they are by the runtime: escape them
			// here so that a key cannot inject a separator.
			esc := make(map[string]any, len(t))
			for k, e := range t {
				if !isScalar(e) {
					return "", fmt.Errorf("style %s serializes an object of strings, numbers or booleans only (member %q is not)", st.style, k)
				}
				switch st.loc {
				case locPath:
					k = url.PathEscape(k)
				case locQuery:
					k = url.QueryEscape(k)
				}
				esc[k] = e
			}
			v = esc
		}
	}
	// Everything is escaped first; allow_reserved then unescapes what it
	// may (keepReserved).
	out, err := runtime.StyleParamWithOptions(st.style, st.explode, name, v, runtime.StyleParamOptions{
		ParamLocation: st.rloc,
	})
	if err != nil {
		return "", fmt.Errorf("cannot be serialized with style %s", st.style)
	}
	if st.loc == locQuery {
		// Values and names are escaped: a remaining space or pipe is a
		// delimiter, which must be escaped in a URL.
		out = delimiterEscaper.Replace(out)
		if st.allowReserved {
			out = keepReserved(out)
		}
	}
	return out, nil
}

// keepReserved unescapes, in an escaped query, the reserved characters
// of RFC 3986 that allow_reserved sends as they are, except those that
// would change the query's structure or a value: '&' and '=' (a new
// parameter), '#' (a fragment) and '+' (a space to form decoders) stay
// escaped.
func keepReserved(q string) string {
	if !strings.Contains(q, "%") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q))
	for i := 0; i < len(q); i++ {
		if q[i] == '%' && i+2 < len(q) {
			if c, err := strconv.ParseUint(q[i+1:i+3], 16, 8); err == nil && strings.IndexByte(":/?[]@!$'()*,;", byte(c)) >= 0 {
				b.WriteByte(byte(c))
				i += 2
				continue
			}
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// delimiterEscaper escapes the delimiters of spaceDelimited and
// pipeDelimited query values.
var delimiterEscaper = strings.NewReplacer(" ", "%20", "|", "%7C")

func isScalar(v any) bool {
	switch v.(type) {
	case string, json.Number, bool:
		return true
	}
	return false
}
