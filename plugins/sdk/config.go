package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crankmcp/crank/plugins/sdk/pointer"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/crankmcp/crank/plugins/sdk/lru"
)

// DefaultMaxCachedConfigs bounds a Config's cache when Max is 0.
const DefaultMaxCachedConfigs = 512

// Config is an adapter's operation config, declared once as the Go struct
// C; P is the prepared form its calls use. From C come the decoding of a
// raw config, the diagnostics of unknown fields and of values of the wrong
// JSON type, and the JSON Schema that Describe publishes (Schema). Prepare,
// the adapter's code, checks the values and builds P. Prepared forms are
// cached by the operation's BaseDir, raw config and egress rules.
//
// C's fields are named by their json tags (the Go field name without one;
// "-" leaves a field out; embedded structs lend their fields) and matched
// case-sensitively. A `jsonschema` tag is the field's description in the
// schema. A field without omitempty (or omitzero) is required in the
// schema; Prepare reports it missing, in its own words. Decoding follows
// the field's Go type:
//
//   - string, bool, integers (range-checked) and floats take the JSON
//     scalar of that type;
//   - structs take an object whose members are the struct's fields; maps
//     with string keys take an object; slices take a list;
//   - pointers and slices stay nil when the field is absent or null (a
//     null is always the same as an absent field, and the schema does not
//     mention it), so Prepare can tell an absent field from an empty one;
//   - json.RawMessage takes any JSON value, for a field that accepts
//     several shapes: Prepare reads it, and Keywords states its schema;
//     any (an empty interface) takes any value as encoding/json decodes it;
//   - a type that implements json.Unmarshaler decodes itself; its error's
//     text is the diagnostic's message, so it must not quote the value
//     (see Duration).
//
// Tags named after the JSON Schema keywords they set state what Go types
// cannot, once for the schema and the decoding:
//
//   - `default:"…"` is the field's value when the config leaves it out
//     (or writes null), and its schema's default; a field with a default
//     is never required. It is written as JSON (`default:"10000"`,
//     `default:"true"`); for a string, or text that is not JSON, as the
//     text itself (`default:"auto"`, `default:"30s"`). With
//     `zero:"default"` a written zero (0, "", false) is the default too,
//     for a field whose documentation says so. Decoding into a value that
//     already holds something keeps that for an absent field.
//   - `minimum:"…"`, `maximum:"…"` and `exclusiveMinimum:"…"` bound a
//     number; `enum:"a,b,c"` lists the values a field may take (written
//     empty, it is as if left out). A value
//     outside them is an error at its path ("must be from 1 to 600000,
//     got 3600000"; "must be one of a, b, c": a number out of its bounds
//     is a quantity and named, any other value never is), and the field
//     takes its default.
//
// A `reach` tag says what a field's value reaches outside the adapter
// (see Reach): `reach:"command"`, `reach:"file"`, `reach:"upstream"` or
// `reach:"location"`. The schema carries it as the keyword "x-crank-reach"
// (ReachKeyword), and the host refuses an operations catalog's entry whose
// config reaches what the catalog may not (docs/security.md). Tag every
// field that names a program, a local path or an address the adapter
// connects to; a config that reaches nothing says so with
// Keywords{"": `{"x-crank-reach":"none"}`}. The host serves no catalog
// entry of an adapter whose schema says nothing of its reach.
//
// Every unknown field, at any depth, is an error at its dotted path (such
// as "stream.reconect" or "overrides.list.nmae") with the nearest known
// name as a suggestion (Suggest), or else the list of known names. A value
// of the wrong type is an error at its path naming the expected type and
// the one written ("must be a string, got a number", "must be a list of
// strings, got an object"); the field keeps its zero value (or default),
// and Prepare's own diagnostics on it (or below it) are dropped, so a
// field is reported once. Diagnostics never quote config values. Decode
// is the same decoding for a struct of the caller's own.
//
// The zero value is ready to use once Prepare is set; a Config must not
// be copied after first use. Its methods are safe for concurrent use.
type Config[C, P any] struct {
	// Name is the adapter's name, used in the schema's title ("<name>
	// operation config") and in messages such as "the <name> adapter config
	// must be a JSON object".
	Name string
	// Prepare checks the decoded config c and returns its prepared form,
	// reporting problems through d. It runs about once per distinct
	// (BaseDir, Config, Egress); op carries only those three (resolve
	// relative paths with op.ResolvePath; build clients under op.Egress). It runs even when decoding reported
	// errors (with the faulty fields left zero), so every problem is
	// reported at once; what it returns is kept as is, so it should
	// return the zero P when d.Failed(). It never runs for a config that
	// is not a JSON object.
	Prepare func(op *Operation, c *C, d *Diagnostics) P
	// Keywords are JSON Schema keywords stated by hand, merged over the
	// schema derived from C, keyed by the dotted path of the field ("" is
	// the config itself, "*" a map's values or a list's items, as in
	// "credentials.*"): for fields that accept several shapes
	// (json.RawMessage, whose derived schema accepts anything), and for
	// what Go types and tags cannot say (format, oneOf, pattern). A stated
	// "type" replaces the derived one.
	Keywords map[string]string
	// Max bounds the number of prepared configs held; DefaultMaxCachedConfigs
	// when 0. A full cache drops the least recently used one (package lru).
	Max int

	cacheOnce sync.Once
	cache     *lru.Cache[configKey, *Prepared[P]]

	schemaOnce sync.Once
	schema     json.RawMessage
	schemaErr  error
}

// Prepared is a config's prepared form with the diagnostics found on the
// way. It is shared by every call of the config: treat it as read-only.
type Prepared[P any] struct {
	// Value is what Prepare returned (the zero P when the config is not a
	// JSON object).
	Value P
	diags []Diagnostic
	err   error
}

// Diagnostics returns a copy of the diagnostics, nil when there are none:
// what ValidateOperation returns.
func (p *Prepared[P]) Diagnostics() []Diagnostic {
	if len(p.diags) == 0 {
		return nil
	}
	return slices.Clone(p.diags)
}

// Err is nil when the config loads; otherwise an error whose message
// joins the error diagnostics after "invalid <name> operation config: ",
// for a call made with a config that does not load.
func (p *Prepared[P]) Err() error { return p.err }

// configKey is what a prepared config is cached by.
type configKey struct{ config, baseDir, egress string }

func keyOf(op *Operation) configKey { return configKey{string(op.Config), op.BaseDir, op.Egress.Key()} }

// prepared is the cache of prepared configs.
func (c *Config[C, P]) prepared() *lru.Cache[configKey, *Prepared[P]] {
	c.cacheOnce.Do(func() {
		limit := c.Max
		if limit <= 0 {
			limit = DefaultMaxCachedConfigs
		}
		c.cache = lru.New[configKey, *Prepared[P]](limit, nil)
	})
	return c.cache
}

// Get returns the prepared form of op's config: the cached one, or else
// decoded and prepared now (the form another caller cached first, when
// two prepare it at once).
func (c *Config[C, P]) Get(op *Operation) *Prepared[P] {
	if p, ok := c.prepared().Get(keyOf(op)); ok {
		return p
	}
	p := c.prepare(op)
	p, _ = c.prepared().GetOrPut(keyOf(op), func() *Prepared[P] { return p })
	return p
}

// Fresh decodes and prepares op's config now, replacing the cached form:
// for load time (ValidateOperation, ExpandOperation), so that a reload
// reads again the files a config names.
func (c *Config[C, P]) Fresh(op *Operation) *Prepared[P] {
	p := c.prepare(op)
	c.prepared().Put(keyOf(op), p)
	return p
}

// Put caches v, without diagnostics, as the prepared form of op's config:
// for configs the adapter derives itself, such as the config of a tool
// that ExpandOperation returns, already prepared.
func (c *Config[C, P]) Put(op *Operation, v P) {
	c.prepared().Put(keyOf(op), &Prepared[P]{Value: v})
}

// Len is the number of prepared configs held.
func (c *Config[C, P]) Len() int { return c.prepared().Len() }

// prepare decodes op's config into a C and runs Prepare on it.
func (c *Config[C, P]) prepare(op *Operation) *Prepared[P] {
	p := &Prepared[P]{}
	var d Diagnostics
	var cfg C
	dec := decoder{d: &d}
	if dec.root(op.Config, reflect.ValueOf(&cfg).Elem(), c.Name) && c.Prepare != nil {
		before := len(d.List())
		p.Value = c.Prepare(&Operation{Config: op.Config, BaseDir: op.BaseDir, Egress: op.Egress}, &cfg, &d)
		if len(dec.out.bad) > 0 {
			all := d.List()
			d = Diagnostics{}
			d.Add(all[:before]...)
			for _, x := range all[before:] {
				if !dec.out.refused(x.Field) {
					d.Add(x)
				}
			}
		}
	}
	p.diags = d.List()
	if d.Failed() {
		p.err = errors.New(d.Summary(c.title("invalid ", "operation config")))
	}
	return p
}

func (c *Config[C, P]) title(before, after string) string {
	if c.Name == "" {
		return before + after
	}
	return before + c.Name + " " + after
}

// Duration is a config field holding a positive Go duration written as a
// string, such as "10s" or "1500ms" (time.ParseDuration). Its schema is a
// string.
type Duration time.Duration

// UnmarshalJSON implements json.Unmarshaler; its errors never quote the
// value.
func (t *Duration) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	var s string
	if json.Unmarshal(b, &s) != nil {
		return errors.New(`must be a Go duration string such as "10s" or "1500ms"`)
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	switch {
	case err != nil:
		return errors.New(`not a valid duration: use a Go duration such as "10s" or "1500ms"`)
	case v <= 0:
		return errors.New("must be positive")
	}
	*t = Duration(v)
	return nil
}

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// Decoded is what decoding a config found besides its values: the fields
// it wrote (and the values it refused).
type Decoded struct {
	// written holds the JSON pointers of the fields written.
	written map[string]bool
	// bad holds the paths of the values refused: of the wrong type, or
	// outside their tags' bounds.
	bad []string
}

// Has reports whether the config wrote the field at ptr, an RFC 6901 JSON
// pointer such as "/limits/max_items" (a null is not written, nor a zero
// that stands for the default).
func (o *Decoded) Has(ptr string) bool { return o.written[ptr] }

// refused reports whether field is a value decoding refused (of the
// wrong type, or outside its tags' bounds) or lies in one.
func (o *Decoded) refused(field string) bool {
	for _, b := range o.bad {
		if field == b || strings.HasPrefix(field, b) && (b == "" || field[len(b)] == '.' || field[len(b)] == '[') {
			return true
		}
	}
	return false
}

// Decode decodes the JSON object raw (empty or null: {}) into the struct
// v points to, as a Config decodes its C: every unknown field, value of
// the wrong type and value outside its tags' bounds is an error
// diagnostic at its dotted path, in one pass; absent fields take their
// default tags. For a struct of the caller's own that follows the rules
// of Config (the host's operations-file entry).
func Decode(raw json.RawMessage, v any) (*Decoded, []Diagnostic) {
	var d Diagnostics
	dec := decoder{d: &d}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("null")
	}
	dec.value(at{}, raw, reflect.ValueOf(v).Elem())
	return &dec.out, d.List()
}

// decoder decodes a raw config into a value of the config struct, adding
// a diagnostic for every unknown field and every value refused.
type decoder struct {
	d   *Diagnostics
	out Decoded
}

// root decodes the config object raw (null or empty: {}) into v. It
// reports false when raw is not an object.
func (dc *decoder) root(raw json.RawMessage, v reflect.Value, name string) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	var m map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		if name != "" {
			name += " adapter "
		}
		dc.d.Errorf("", "the %sconfig must be a JSON object", name)
		return false
	}
	dc.members(at{}, m, v)
	return true
}

// at is where a value is: its dotted path, as diagnostics name it, and
// its JSON pointer.
type at struct{ path, ptr string }

func (a at) key(k string) at {
	return at{join(a.path, k), pointer.Join(a.ptr, k)}
}

func (a at) index(i int) at {
	return at{fmt.Sprintf("%s[%d]", a.path, i), a.ptr + "/" + strconv.Itoa(i)}
}

func (dc *decoder) wrongType(a at, msg string) {
	dc.out.bad = append(dc.out.bad, a.path)
	dc.d.Add(Errorf(a.path, "%s", msg).At(a.ptr)) // a map's key may hold a dot
}

// mismatch refuses raw, of another JSON type than want.
func (dc *decoder) mismatch(a at, want string, raw json.RawMessage) {
	dc.wrongType(a, "must be "+want+", got "+jsonType(raw))
}

// jsonType names the JSON type of raw for a message (TypeName).
func jsonType(raw json.RawMessage) string {
	switch raw[0] {
	case '"':
		return TypeName("string")
	case '{':
		return TypeName("object")
	case '[':
		return TypeName("array")
	case 't', 'f':
		return TypeName("boolean")
	case 'n':
		return TypeName("null")
	}
	return TypeName("number")
}

// TypeName names a JSON type, as JSON Schema writes it ("string",
// "integer", "number", "boolean", "array", "object", "null"), for a
// message: "a string", "an integer", "a number", "a boolean", "a list",
// "an object", "null"; "a value" for anything else. Config diagnostics
// and the gateway's argument errors name types with it alone.
func TypeName(t string) string {
	switch t {
	case "array":
		return "a list"
	case "null":
		return "null"
	case "string", "number", "boolean":
		return "a " + t
	case "integer", "object":
		return "an " + t
	}
	return "a value"
}

// value decodes raw into v; absent and null leave v as it is, but for
// the defaults of a struct's fields.
func (dc *decoder) value(a at, raw json.RawMessage, v reflect.Value) {
	path := a.path
	raw = bytes.TrimSpace(raw)
	t := v.Type()
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		if t.Kind() == reflect.Struct && t != rawMessageType && !reflect.PointerTo(t).Implements(unmarshalerType) {
			dc.members(a, nil, v)
		}
		return
	}
	if t == rawMessageType {
		v.SetBytes(raw)
		return
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		if err := v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
			dc.wrongType(a, err.Error())
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		e, bad := reflect.New(t.Elem()), len(dc.out.bad)
		dc.value(a, raw, e.Elem())
		if len(dc.out.bad) == bad || dc.out.bad[len(dc.out.bad)-1] != path {
			v.Set(e) // absent when of the wrong type itself
		}
	case reflect.Interface:
		var x any
		if t.NumMethod() > 0 || json.Unmarshal(raw, &x) != nil {
			dc.wrongType(a, "cannot be read")
			return
		}
		v.Set(reflect.ValueOf(x))
	case reflect.Struct:
		var m map[string]json.RawMessage
		if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
			dc.mismatch(a, TypeName("object")+" "+shape(t), raw)
			return
		}
		dc.members(a, m, v)
	case reflect.Map:
		var m map[string]json.RawMessage
		if t.Key().Kind() != reflect.String || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
			dc.mismatch(a, TypeName("object"), raw)
			return
		}
		out := reflect.MakeMapWithSize(t, len(m))
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			e := reflect.New(t.Elem()).Elem()
			dc.value(a.key(k), m[k], e)
			out.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), e)
		}
		v.Set(out)
	case reflect.Slice:
		var list []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &list) != nil {
			dc.mismatch(a, TypeName("array")+listOf(t.Elem()), raw)
			return
		}
		out := reflect.MakeSlice(t, len(list), len(list))
		for i, r := range list {
			dc.value(a.index(i), r, out.Index(i))
		}
		v.Set(out)
	case reflect.String:
		var s string
		if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			dc.mismatch(a, TypeName("string"), raw)
			return
		}
		v.SetString(s)
	case reflect.Bool:
		switch string(raw) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			dc.mismatch(a, TypeName("boolean"), raw)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(string(raw), 10, 64)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange):
			dc.mismatch(a, TypeName("integer"), raw)
		case err != nil || v.OverflowInt(n):
			bits := t.Bits()
			dc.wrongType(a, fmt.Sprintf("must be an integer from %d to %d", -1<<(bits-1), 1<<(bits-1)-1))
		default:
			v.SetInt(n)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(string(raw), 10, 64)
		if err != nil || v.OverflowUint(n) {
			dc.wrongType(a, fmt.Sprintf("must be an integer from 0 to %d", uint64(1)<<t.Bits()-1))
			return
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(string(raw), t.Bits())
		if err != nil || !isNumber(raw) {
			dc.mismatch(a, TypeName("number"), raw)
			return
		}
		v.SetFloat(f)
	default:
		dc.wrongType(a, "cannot be read")
	}
}

// isNumber reports whether raw is a JSON number.
func isNumber(raw []byte) bool {
	var n json.Number
	return (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') && json.Unmarshal(raw, &n) == nil
}

// members decodes the members of an object (nil: absent) into the struct
// v: the fields written, checked against their tags, and the defaults of
// the others.
func (dc *decoder) members(a at, m map[string]json.RawMessage, v reflect.Value) {
	fields := structFields(v.Type())
	if m != nil {
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.name
		}
		prefix := a.path
		if prefix != "" {
			prefix += "."
		}
		dc.d.UnknownFields(m, names, prefix)
	}
	for i := range fields {
		f := &fields[i]
		fa := a.key(f.name)
		raw := bytes.TrimSpace(m[f.name])
		if len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
			if dc.out.written == nil {
				dc.out.written = map[string]bool{}
			}
			dc.out.written[fa.ptr] = true
			fv, bad := fieldAlloc(v, f.index), len(dc.out.bad)
			dc.value(fa, raw, fv)
			if (f.zeroDefault || len(f.enum) > 0) && fv.IsZero() {
				delete(dc.out.written, fa.ptr) // as if left out
				dc.setDefault(fa, f, fv)
			} else if len(dc.out.bad) == bad {
				if msg := f.refuse(reflect.Indirect(fv)); msg != "" {
					dc.wrongType(fa, msg)
					fv.SetZero()
					dc.setDefault(fa, f, fv)
				}
			}
			continue
		}
		if f.def != nil || f.nested {
			fv := fieldAlloc(v, f.index)
			if f.nested {
				dc.members(fa, nil, fv)
			}
			dc.setDefault(fa, f, fv)
		}
	}
}

// setDefault sets a field that holds nothing to its default.
func (dc *decoder) setDefault(a at, f *configField, v reflect.Value) {
	if f.def != nil && v.IsZero() {
		dc.value(a, f.def, v)
	}
}

// configField is a struct field as a config member, with its tags.
type configField struct {
	name  string
	index []int
	// def is the default as JSON, nil for none; zeroDefault: a written
	// zero is the default too; nested: a struct (not a pointer) whose own
	// fields may have defaults.
	def         json.RawMessage
	zeroDefault bool
	nested      bool
	// min, max and xmin are the bounds (xmin exclusive), enum the values
	// allowed, as written in the tags.
	min, max, xmin string
	enum           []string
}

// refuse is the message that refuses the decoded value v of the field,
// "" when its tags allow it.
func (f *configField) refuse(v reflect.Value) string {
	if !v.IsValid() {
		return ""
	}
	if len(f.enum) > 0 && !slices.Contains(f.enum, fmt.Sprint(v.Interface())) {
		return "must be one of " + strings.Join(f.enum, ", ")
	}
	if f.min == "" && f.max == "" && f.xmin == "" {
		return ""
	}
	var x float64
	var got string
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x, got = float64(v.Int()), strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		x, got = float64(v.Uint()), strconv.FormatUint(v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		x = v.Float()
		got = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return ""
	}
	num := func(s string) float64 { f, _ := strconv.ParseFloat(s, 64); return f }
	if (f.min == "" || x >= num(f.min)) && (f.xmin == "" || x > num(f.xmin)) && (f.max == "" || x <= num(f.max)) {
		return ""
	}
	switch {
	case f.min != "" && f.max != "":
		return fmt.Sprintf("must be from %s to %s, got %s", f.min, f.max, got)
	case f.xmin != "" && f.max != "":
		return fmt.Sprintf("must be greater than %s and at most %s, got %s", f.xmin, f.max, got)
	case f.min != "":
		return fmt.Sprintf("must be at least %s, got %s", f.min, got)
	case f.xmin != "":
		return fmt.Sprintf("must be greater than %s, got %s", f.xmin, got)
	}
	return fmt.Sprintf("must be at most %s, got %s", f.max, got)
}

var structFieldCache sync.Map // reflect.Type → []configField

// structFields lists t's config members in field order: exported fields by
// their json names, and the members of embedded structs.
func structFields(t reflect.Type) []configField {
	if f, ok := structFieldCache.Load(t); ok {
		return f.([]configField)
	}
	var out []configField
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			idx := append(slices.Clone(index), i)
			if f.Anonymous {
				et := f.Type
				if et.Kind() == reflect.Pointer {
					et = et.Elem()
				}
				if et.Kind() == reflect.Struct {
					walk(et, idx)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			name := f.Name
			if tag, ok := f.Tag.Lookup("json"); ok {
				n, _, found := strings.Cut(tag, ",")
				if n == "-" && !found {
					continue
				}
				if n != "" {
					name = n
				}
			}
			out = append(out, tagged(configField{name: name, index: idx}, f))
		}
	}
	walk(t, nil)
	structFieldCache.Store(t, out)
	return out
}

// tagged reads the tags of f into c.
func tagged(c configField, f reflect.StructField) configField {
	c.min, c.max, c.xmin = f.Tag.Get("minimum"), f.Tag.Get("maximum"), f.Tag.Get("exclusiveMinimum")
	if e := f.Tag.Get("enum"); e != "" {
		c.enum = strings.Split(e, ",")
	}
	if d, ok := f.Tag.Lookup("default"); ok {
		c.def = defaultJSON(d, f.Type)
		c.zeroDefault = f.Tag.Get("zero") == "default"
	}
	c.nested = f.Type.Kind() == reflect.Struct && f.Type != rawMessageType && !reflect.PointerTo(f.Type).Implements(unmarshalerType)
	return c
}

// defaultJSON is a default tag as JSON: the text itself for a string
// field or text that is not JSON.
func defaultJSON(tag string, t reflect.Type) json.RawMessage {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.String || !json.Valid([]byte(tag)) {
		b, _ := json.Marshal(tag)
		return b
	}
	return json.RawMessage(tag)
}

// fieldAlloc is v.FieldByIndex, allocating embedded struct pointers.
func fieldAlloc(v reflect.Value, index []int) reflect.Value {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// shape renders a struct's members for a message: {a, b, c}, the first
// six.
func shape(t reflect.Type) string {
	fields := structFields(t)
	names := make([]string, 0, 7)
	for i, f := range fields {
		if i == 6 {
			names = append(names, "...")
			break
		}
		names = append(names, f.name)
	}
	return "{" + strings.Join(names, ", ") + "}"
}

// listOf names the items of a list for a message, "" when they may be
// anything.
func listOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType || reflect.PointerTo(t).Implements(unmarshalerType) {
		return ""
	}
	switch t.Kind() {
	case reflect.String:
		return " of strings"
	case reflect.Bool:
		return " of booleans"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return " of integers"
	case reflect.Float32, reflect.Float64:
		return " of numbers"
	case reflect.Struct, reflect.Map:
		return " of objects"
	case reflect.Slice:
		return " of lists"
	}
	return ""
}

// Schema returns the JSON Schema (2020-12) of the config, derived from C
// with github.com/google/jsonschema-go and Keywords merged in: what
// Describe reports as ConfigSchema. It is computed once; an error means C
// or Keywords is wrong (a type JSON cannot hold, a path that names no
// field, keywords that are not a JSON object).
func (c *Config[C, P]) Schema() (json.RawMessage, error) {
	c.schemaOnce.Do(func() { c.schema, c.schemaErr = c.buildSchema() })
	return c.schema, c.schemaErr
}

func (c *Config[C, P]) buildSchema() (json.RawMessage, error) {
	s, err := SchemaFor[C](c.title("", "operation config"), c.Keywords)
	if err != nil {
		return nil, fmt.Errorf("sdk: the config schema of %s: %w", c.title("the", "adapter"), err)
	}
	return s, nil
}

// SchemaFor returns the JSON Schema (2020-12) of the struct T as Config
// derives its C's: from T's fields and tags, with keywords (keyed by
// dotted path, as Config.Keywords) merged over it, and title. An error
// means T, its tags or keywords are wrong.
func SchemaFor[T any](title string, keywords map[string]string) (json.RawMessage, error) {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		rawMessageType:              {},
		reflect.TypeFor[Duration](): {Type: "string"},
	}})
	if err != nil {
		return nil, err
	}
	dropNull(s)
	if err := markTags(reflect.TypeFor[T](), s); err != nil {
		return nil, err
	}
	s.Schema = "https://json-schema.org/draft/2020-12/schema"
	s.Title = title
	paths := make([]string, 0, len(keywords))
	for p := range keywords {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		if err := mergeKeywords(s, p, keywords[p]); err != nil {
			return nil, fmt.Errorf("the keywords of %q: %w", p, err)
		}
	}
	return json.Marshal(s)
}

// Reach is what a config value reaches outside the adapter: the host
// reads it from the config schema (ReachKeyword) to decide what an
// operations catalog's entry may configure.
type Reach string

// The reaches a `reach` tag names.
const (
	// ReachCommand: a program the adapter starts, or what only such a
	// program gets (its arguments, its environment).
	ReachCommand Reach = "command"
	// ReachFile: a local file or directory the adapter reads.
	ReachFile Reach = "file"
	// ReachUpstream: an address the adapter connects to, an absolute URL
	// or host:port (a gRPC target such as dns:///host:port or
	// unix:///path included).
	ReachUpstream Reach = "upstream"
	// ReachLocation: an absolute http(s) URL, which is an upstream, or
	// else a local file.
	ReachLocation Reach = "location"
	// ReachNone, at the schema's root only: the config reaches nothing
	// outside the adapter but through its tagged fields.
	ReachNone Reach = "none"
)

// ReachKeyword is the JSON Schema keyword that carries a field's Reach.
const ReachKeyword = "x-crank-reach"

// markTags sets, at any depth, the keywords of t's fields' tags on their
// subschemas: ReachKeyword from reach, and default, minimum, maximum,
// exclusiveMinimum and enum (a field with a default is not required).
func markTags(t reflect.Type, s *jsonschema.Schema) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s == nil || t == rawMessageType {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return markTags(t.Elem(), s.Items)
	case reflect.Map:
		return markTags(t.Elem(), s.AdditionalProperties)
	case reflect.Struct:
	default:
		return nil
	}
	for _, f := range structFields(t) {
		sf := t.FieldByIndex(f.index)
		sub := s.Properties[f.name]
		if sub == nil {
			continue
		}
		if tag, ok := sf.Tag.Lookup("reach"); ok {
			switch r := Reach(tag); r {
			case ReachCommand, ReachFile, ReachUpstream, ReachLocation:
				if sub.Extra == nil {
					sub.Extra = map[string]any{}
				}
				sub.Extra[ReachKeyword] = string(r)
			default:
				return fmt.Errorf("field %q: reach %q is not command, file, upstream or location", f.name, tag)
			}
		}
		if err := f.keywords(sf.Type, sub); err != nil {
			return fmt.Errorf("field %q: %w", f.name, err)
		}
		if f.def != nil {
			s.Required = slices.DeleteFunc(s.Required, func(n string) bool { return n == f.name })
		}
		if err := markTags(sf.Type, sub); err != nil {
			return err
		}
	}
	return nil
}

// keywords sets the keywords of the field's tags on its schema s; t is
// the field's type, which its default must decode into.
func (f *configField) keywords(t reflect.Type, s *jsonschema.Schema) error {
	for _, b := range []struct {
		tag string
		dst **float64
	}{{f.min, &s.Minimum}, {f.max, &s.Maximum}, {f.xmin, &s.ExclusiveMinimum}} {
		if b.tag == "" {
			continue
		}
		n, err := strconv.ParseFloat(b.tag, 64)
		if err != nil {
			return fmt.Errorf("bound %q is not a number", b.tag)
		}
		*b.dst = &n
	}
	for _, e := range f.enum {
		var v any = e
		if n, err := strconv.ParseFloat(e, 64); err == nil && s.Type != "string" {
			v = n
		}
		s.Enum = append(s.Enum, v)
	}
	if f.def != nil {
		var d Diagnostics
		dc := decoder{d: &d}
		dc.value(at{}, f.def, reflect.New(t).Elem())
		if d.Failed() {
			return fmt.Errorf("default %s: %s", f.def, d.List()[0].Message)
		}
		s.Default = f.def
	}
	return nil
}

// dropNull takes "null" out of the types jsonschema-go derives for
// pointers and slices: a null is an absent field, and the schema says
// which fields may be absent.
func dropNull(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if i := slices.Index(s.Types, "null"); i >= 0 && len(s.Types) == 2 {
		s.Type, s.Types = s.Types[1-i], nil
	}
	for _, p := range s.Properties {
		dropNull(p)
	}
	dropNull(s.AdditionalProperties)
	dropNull(s.Items)
}

// mergeKeywords merges the keywords kw over the subschema of s at path.
func mergeKeywords(s *jsonschema.Schema, path, kw string) error {
	if path != "" {
		for _, seg := range strings.Split(path, ".") {
			var next *jsonschema.Schema
			switch {
			case seg != "*":
				next = s.Properties[seg]
			case s.Items != nil:
				next = s.Items
			case s.Properties == nil:
				next = s.AdditionalProperties
			}
			if next == nil {
				return fmt.Errorf("no field %q", seg)
			}
			s = next
		}
	}
	var h jsonschema.Schema
	if err := json.Unmarshal([]byte(kw), &h); err != nil {
		return err
	}
	if h.Type != "" || h.Types != nil {
		s.Type, s.Types = "", nil
	}
	for k, v := range s.Extra { // keywords of tags stay
		if _, ok := h.Extra[k]; !ok && h.Extra != nil {
			h.Extra[k] = v
		}
	}
	dst, src := reflect.ValueOf(s).Elem(), reflect.ValueOf(&h).Elem()
	for i := range src.NumField() {
		if f := src.Field(i); !f.IsZero() {
			dst.Field(i).Set(f)
		}
	}
	return nil
}
