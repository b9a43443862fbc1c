package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/crankmcp/crank/host/jsonpath"

	"github.com/crankmcp/crank/host/opsfile"
)

// Document is a catalog's content: an operations file (format version 1)
// without adapter declarations. Each entry is kept as the operator wrote
// it — the same fields and values, placeholders unexpanded — as a JSON
// object with sorted keys (so equal entries are equal bytes and diffs are
// stable; YAML comments and key order are not kept).
type Document struct {
	Operations []json.RawMessage
	// RateLimits are the catalog's rate limits (rate_limits), kept as
	// the entries are; they add to the handler's, never replace them.
	RateLimits []json.RawMessage
}

// ParseDocument reads an operations file (YAML or JSON) as a catalog
// document. Its problems are those of its shape, as the host's load
// reports them (opsfile.CheckFile: text that is not YAML or JSON, unknown
// fields, wrong types, values out of bounds, names, an adapters block),
// each placed by pointer and line. What the host and the adapters check
// beyond is Validate's.
func ParseDocument(data []byte) (*Document, opsfile.Problems) {
	v, probs := parseText(data)
	if probs != nil {
		return nil, probs
	}
	if probs := opsfile.CheckFile(canonical(v)); len(probs) > 0 {
		return nil, opsfile.PlaceLines(data, probs)
	}
	doc := &Document{}
	ops, _ := v.(map[string]any)["operations"].([]any)
	for _, e := range ops {
		doc.Operations = append(doc.Operations, canonical(e))
	}
	limits, _ := v.(map[string]any)["rate_limits"].([]any)
	for _, l := range limits {
		doc.RateLimits = append(doc.RateLimits, canonical(l))
	}
	return doc, nil
}

// ParseEntry reads one operation entry (YAML or JSON), as in an
// operations file's list, and checks its shape as the host's load checks
// an entry of a file (opsfile.CheckEntry). Pointers are relative to the
// entry.
func ParseEntry(data []byte) (json.RawMessage, opsfile.Problems) {
	v, probs := parseText(data)
	if probs != nil {
		return nil, probs
	}
	raw := canonical(v)
	if ps := opsfile.CheckEntry(raw); len(ps) > 0 {
		return nil, opsfile.PlaceLines(data, ps)
	}
	return raw, nil
}

// parseText reads YAML 1.2 or JSON into a JSON-like value with exact
// numbers.
func parseText(data []byte) (any, opsfile.Problems) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, opsfile.Problems{{Message: "the body is empty: send an operations file (YAML or JSON)"}}
	}
	raw, err := opsfile.YAMLToJSON(data)
	if err != nil {
		return nil, opsfile.Problems{yamlProblem(err)}
	}
	v, err := jsonpath.Decode(raw)
	if err != nil {
		return nil, opsfile.Problems{{Message: "not valid YAML or JSON: " + err.Error()}}
	}
	return v, nil
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

func yamlProblem(err error) opsfile.Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	p := opsfile.Problem{Message: "not valid YAML or JSON: " + msg}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
	}
	return p
}

// canonical is v as JSON with sorted keys and no HTML escaping.
func canonical(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// entryName is an entry's name ("" when it has none).
func entryName(raw json.RawMessage) string {
	var e struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(raw, &e)
	return e.Name
}

// Names returns the entries' names in order.
func (d *Document) Names() []string {
	out := make([]string, len(d.Operations))
	for i, e := range d.Operations {
		out[i] = entryName(e)
	}
	return out
}

// Index returns the position of the entry named name, or -1.
func (d *Document) Index(name string) int {
	for i, e := range d.Operations {
		if entryName(e) == name {
			return i
		}
	}
	return -1
}

// Entry returns the entry named name, or nil.
func (d *Document) Entry(name string) json.RawMessage {
	if i := d.Index(name); i >= 0 {
		return d.Operations[i]
	}
	return nil
}

// With returns a copy of d with entry in place of the entry of the same
// name, or added at the end.
func (d *Document) With(entry json.RawMessage) *Document {
	out := &Document{Operations: slices.Clone(d.Operations), RateLimits: d.RateLimits}
	if i := d.Index(entryName(entry)); i >= 0 {
		out.Operations[i] = entry
	} else {
		out.Operations = append(out.Operations, entry)
	}
	return out
}

// Without returns a copy of d without the entry named name.
func (d *Document) Without(name string) *Document {
	out := &Document{RateLimits: d.RateLimits}
	for _, e := range d.Operations {
		if entryName(e) != name {
			out.Operations = append(out.Operations, e)
		}
	}
	return out
}

// JSON is the document as an operations file in JSON, as it is stored.
func (d *Document) JSON() json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"version":1,"operations":[`)
	writeList(&b, d.Operations)
	if len(d.RateLimits) > 0 {
		b.WriteString(`],"rate_limits":[`)
		writeList(&b, d.RateLimits)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// writeList writes the JSON values of a list, comma-separated.
func writeList(b *bytes.Buffer, vs []json.RawMessage) {
	for i, v := range vs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(v)
	}
}

// WithRateLimits returns a copy of d whose rate limits are limits (each
// as written, JSON).
func (d *Document) WithRateLimits(limits []json.RawMessage) *Document {
	out := &Document{Operations: d.Operations}
	for _, l := range limits {
		v, err := jsonpath.Decode(l)
		if err != nil {
			continue
		}
		out.RateLimits = append(out.RateLimits, canonical(v))
	}
	return out
}

// Decode reads a stored document (Document.JSON's form).
func Decode(raw []byte) (*Document, error) {
	var f struct {
		Operations []json.RawMessage `json:"operations"`
		RateLimits []json.RawMessage `json:"rate_limits"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("catalog document: %w", err)
	}
	return &Document{Operations: f.Operations, RateLimits: f.RateLimits}, nil
}

// Compile checks the document as an operations file is loaded — names,
// modes, limits, schemas, placeholders — and returns it as a loaded
// file, its placeholders expanded with opts.Expand and its relative
// paths resolved against opts.Dir. Its entries reach what opts.Allow
// allows, nothing when it is nil. source names the catalog in errors
// ("catalog <name>").
func (d *Document) Compile(source string, opts opsfile.LoadOptions) (*opsfile.File, error) {
	opts.AllowEmpty = true
	if opts.Allow == nil {
		opts.Allow = &opsfile.CatalogAllow{}
	}
	return opsfile.Parse(source, d.JSON(), opts)
}
