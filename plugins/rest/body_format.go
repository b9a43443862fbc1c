package rest

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"mime/multipart"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/crankmcp/crank/plugins/rest/openapi"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// bodyFormatField is the config's body_format as written: how the body
// is sent when it is not JSON.
type bodyFormatField struct {
	MediaType string                       `json:"media_type" jsonschema:"The body's media type: application/x-www-form-urlencoded, multipart/form-data, or any other type sent raw from one string argument (body names it); a JSON type sends JSON, as without body_format."`
	Encoding  map[string]bodyEncodingField `json:"encoding,omitempty" jsonschema:"Form and multipart: how a body property is written, as OpenAPI's encoding object: {property: {style, explode, content_type, file}}."`
	Base64    bool                         `json:"base64,omitempty" jsonschema:"Raw bodies: the argument is the body's bytes in base64 (standard encoding), not its text."`
}

// bodyEncodingField is one property's encoding.
type bodyEncodingField struct {
	Style       string `json:"style,omitempty" jsonschema:"form (the default: a list repeats the name), spaceDelimited, pipeDelimited or deepObject (a[b][c]=v, a[]=v)."`
	Explode     *bool  `json:"explode,omitempty" jsonschema:"OpenAPI explode; default true for form and deepObject."`
	ContentType string `json:"content_type,omitempty" jsonschema:"The property's media type: a JSON type sends its value as JSON text (a multipart JSON part); for a file, the part's Content-Type."`
	File        bool   `json:"file,omitempty" jsonschema:"Multipart: the property is a file, given as its bytes in base64 (standard encoding)."`
}

// Body kinds of body_format.
const (
	kindJSON      = "json"
	kindForm      = "form"
	kindMultipart = "multipart"
	kindRaw       = "raw"
)

// bodyFormat is a parsed body_format; nil on an operation means JSON.
type bodyFormat struct {
	kind      string
	mediaType string
	encoding  map[string]bodyEncoding
	base64    bool
}

type bodyEncoding struct {
	style       string // "" when none is set
	explode     bool
	contentType string
	file        bool
}

const (
	mediaForm      = "application/x-www-form-urlencoded"
	mediaMultipart = "multipart/form-data"
)

// bodyKind is the kind of body a media type is sent as.
func bodyKind(mt string) string {
	switch {
	case httpadapter.JSONMediaType(mt):
		return kindJSON
	case mt == mediaForm:
		return kindForm
	case mt == mediaMultipart:
		return kindMultipart
	}
	return kindRaw
}

// parseBodyFormat reads body_format; it runs after body.
func parseBodyFormat(f *bodyFormatField, op *operation, d *diags) {
	if f == nil {
		return
	}
	mt, _, err := mime.ParseMediaType(f.MediaType)
	if err != nil || !strings.Contains(mt, "/") {
		d.Errorf("body_format.media_type", "required: a media type such as %s", mediaForm)
		return
	}
	bf := &bodyFormat{kind: bodyKind(mt), mediaType: mt, base64: f.Base64}
	if bf.kind == kindRaw {
		bf.mediaType = f.MediaType // parameters (charset) kept
		if op.bodyArg == "" {
			d.Errorf("body", "a raw %s body is one string argument: set body to its name", mt)
		}
	} else if f.Base64 {
		d.Errorf("body_format.base64", "only applies to raw bodies, not %s", mt)
	}
	if bf.kind == kindJSON {
		if mt != "application/json" {
			bf.mediaType = f.MediaType
		}
	}
	if len(f.Encoding) > 0 && bf.kind != kindForm && bf.kind != kindMultipart {
		d.Errorf("body_format.encoding", "only applies to form and multipart bodies")
	}
	for _, name := range sortedKeys(f.Encoding) {
		e := f.Encoding[name]
		field := "body_format.encoding." + name
		be := bodyEncoding{style: e.Style, contentType: e.ContentType, file: e.File}
		switch e.Style {
		case "", openapi.StyleForm, openapi.StyleSpaceDelimited, openapi.StylePipeDelimited, openapi.StyleDeepObject:
		default:
			d.Errorf(field+".style", "one of form, spaceDelimited, pipeDelimited, deepObject")
		}
		be.explode = e.Style == "" || e.Style == openapi.StyleForm || e.Style == openapi.StyleDeepObject
		if e.Explode != nil {
			be.explode = *e.Explode
		}
		if e.File && bf.kind != kindMultipart {
			d.Errorf(field+".file", "only multipart bodies carry files")
		}
		if e.ContentType != "" {
			if ct, _, err := mime.ParseMediaType(e.ContentType); err != nil || !strings.Contains(ct, "/") {
				d.Errorf(field+".content_type", "not a media type")
			}
		}
		if bf.encoding == nil {
			bf.encoding = map[string]bodyEncoding{}
		}
		bf.encoding[name] = be
	}
	op.format = bf
}

// encodeBody turns the JSON body built from the arguments into the
// configured format; it returns the body and its Content-Type.
func (op *operation) encodeBody(body []byte) ([]byte, string, *sdk.UpstreamError) {
	f := op.format
	if f == nil {
		return body, "application/json", nil
	}
	switch f.kind {
	case kindJSON:
		return body, f.mediaType, nil
	case kindRaw:
		var s string
		if json.Unmarshal(body, &s) != nil {
			return nil, "", op.invalidArg("argument %q is the %s body and must be a string", op.bodyArg, f.mediaType)
		}
		if !f.base64 {
			return []byte(s), f.mediaType, nil
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, "", op.invalidArg("argument %q is the %s body and must be its bytes in base64 (standard encoding)", op.bodyArg, f.mediaType)
		}
		return b, f.mediaType, nil
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&obj) != nil || obj == nil {
		return nil, "", op.invalidArg("a %s body is an object of fields", f.mediaType)
	}
	if f.kind == kindForm {
		var fe formEncoder
		for _, k := range sortedKeys(obj) {
			if err := fe.field(k, obj[k], f.encoding[k]); err != nil {
				return nil, "", op.invalidArg("body field %q: %v", k, err)
			}
		}
		return []byte(fe.String(false)), mediaForm, nil
	}
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, k := range sortedKeys(obj) {
		if err := writePart(w, k, obj[k], f.encoding[k]); err != nil {
			return nil, "", op.invalidArg("body field %q: %v", k, err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, "", op.invalidArg("the multipart body cannot be written")
	}
	return buf.Bytes(), w.FormDataContentType(), nil
}

// formEncoder writes application/x-www-form-urlencoded pairs.
//
// Nested values follow the bracket convention that Stripe, Slack, Rails,
// PHP and qs read: an object member is a[b]=v (a[b][c]=v deeper), a list
// element a[]=v, and a list of objects a[0][b]=v (an index groups an
// element's members). A property with no encoding follows OpenAPI's
// default (style form, exploded: a list of scalars repeats the name,
// a=1&a=2) except for nested values, which OpenAPI's form style would
// send without their name: those use brackets too.
type formEncoder struct {
	// pairs are the fields written, unescaped: {name, value}.
	pairs [][2]string
}

func (fe *formEncoder) pair(name, value string) {
	fe.pairs = append(fe.pairs, [2]string{name, value})
}

var bracketUnescaper = strings.NewReplacer("%5B", "[", "%5D", "]")

// String is the pairs as a query string; rawBrackets leaves the
// brackets of names unescaped, as a query's deepObject parameters are
// usually written.
func (fe *formEncoder) String(rawBrackets bool) string {
	var b strings.Builder
	for i, p := range fe.pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		name := url.QueryEscape(p[0])
		if rawBrackets {
			name = bracketUnescaper.Replace(name)
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(p[1]))
	}
	return b.String()
}

// field writes one top-level property.
func (fe *formEncoder) field(name string, v any, e bodyEncoding) error {
	if v == nil {
		return nil
	}
	if e.contentType != "" && httpadapter.JSONMediaType(e.contentType) {
		b, _ := json.Marshal(v)
		fe.pair(name, string(b))
		return nil
	}
	if s, ok := formScalar(v); ok {
		fe.pair(name, s)
		return nil
	}
	switch e.style {
	case openapi.StyleSpaceDelimited, openapi.StylePipeDelimited, openapi.StyleForm:
		list, ok := v.([]any)
		if !ok {
			if e.style == openapi.StyleForm && e.explode {
				// OpenAPI: an exploded form object is its members.
				for _, k := range sortedKeys(v.(map[string]any)) {
					if s, ok := formScalar(v.(map[string]any)[k]); ok {
						fe.pair(k, s)
					} else {
						return fmt.Errorf("style form writes an object of scalars only (member %q is not)", k)
					}
				}
				return nil
			}
			return fmt.Errorf("style %s writes a list, not an object", e.style)
		}
		vals, err := scalars(list, e.style)
		if err != nil {
			return err
		}
		if e.style == openapi.StyleForm && e.explode {
			for _, s := range vals {
				fe.pair(name, s)
			}
			return nil
		}
		sep := map[string]string{openapi.StyleForm: ",", openapi.StyleSpaceDelimited: " ", openapi.StylePipeDelimited: "|"}[e.style]
		fe.pair(name, strings.Join(vals, sep))
		return nil
	case "":
		if list, ok := v.([]any); ok {
			if vals, err := scalars(list, openapi.StyleForm); err == nil {
				for _, s := range vals {
					fe.pair(name, s)
				}
				return nil
			}
		}
	}
	return fe.brackets(name, v, 0)
}

// maxFormDepth bounds the nesting a form body writes.
const maxFormDepth = 32

// brackets writes v under name in the bracket convention.
func (fe *formEncoder) brackets(name string, v any, depth int) error {
	if depth > maxFormDepth {
		return fmt.Errorf("nested deeper than %d levels", maxFormDepth)
	}
	switch t := v.(type) {
	case nil:
		return nil
	case map[string]any:
		for _, k := range sortedKeys(t) {
			if err := fe.brackets(name+"["+k+"]", t[k], depth+1); err != nil {
				return err
			}
		}
		return nil
	case []any:
		for i, e := range t {
			var err error
			if _, ok := formScalar(e); ok || e == nil {
				err = fe.brackets(name+"[]", e, depth+1)
			} else {
				err = fe.brackets(fmt.Sprintf("%s[%d]", name, i), e, depth+1)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	s, _ := formScalar(v)
	fe.pair(name, s)
	return nil
}

// formScalar renders a string, number or boolean.
func formScalar(v any) (string, bool) {
	switch t := v.(type) {
	case string:
		return t, true
	case json.Number:
		return t.String(), true
	case bool:
		if t {
			return "true", true
		}
		return "false", true
	}
	return "", false
}

func scalars(list []any, style string) ([]string, error) {
	out := make([]string, 0, len(list))
	for _, e := range list {
		if e == nil {
			continue
		}
		s, ok := formScalar(e)
		if !ok {
			return nil, fmt.Errorf("style %s writes a list of strings, numbers or booleans only", style)
		}
		out = append(out, s)
	}
	return out, nil
}

// writePart writes one top-level property as multipart parts: a file
// from base64, a value styled like a form field (style set: a[b]=v
// fields), JSON text for an object or a JSON content_type, else a text
// field (a list repeats it).
func writePart(w *multipart.Writer, name string, v any, e bodyEncoding) error {
	if v == nil {
		return nil
	}
	if e.file {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("a file is its bytes as a base64 string")
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			if strings.Contains(s, "://") {
				return fmt.Errorf("a file is its bytes in base64 (standard encoding); a URI is not read")
			}
			return fmt.Errorf("a file is its bytes in base64 (standard encoding)")
		}
		return createPart(w, multipart.FileContentDisposition(name, name), cmp.Or(e.contentType, "application/octet-stream"), b)
	}
	_, isObj := v.(map[string]any)
	if e.style == "" && (isObj || e.contentType != "" && httpadapter.JSONMediaType(e.contentType)) {
		b, _ := json.Marshal(v)
		disposition := strings.TrimSuffix(multipart.FileContentDisposition(name, ""), `; filename=""`)
		return createPart(w, disposition, cmp.Or(e.contentType, "application/json"), b)
	}
	var fe formEncoder
	if err := fe.field(name, v, e); err != nil {
		return err
	}
	for _, p := range fe.pairs {
		if err := w.WriteField(p[0], p[1]); err != nil {
			return err
		}
	}
	return nil
}

// createPart writes one part of its own Content-Type.
func createPart(w *multipart.Writer, disposition, contentType string, b []byte) error {
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", disposition)
	h.Set("Content-Type", contentType)
	pw, err := w.CreatePart(h)
	if err != nil {
		return err
	}
	_, err = pw.Write(b)
	return err
}
