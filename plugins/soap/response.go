package soap

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/beevik/etree"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
	"github.com/crankmcp/crank/plugins/soap/wsse"
)

// parseEnvelope returns the Body element of a SOAP envelope, or nil when
// the bytes are not one; perr is why XML could not be read (too deep
// included).
func parseEnvelope(body []byte) (b *etree.Element, ns string, perr error) {
	t := bytes.TrimSpace(body)
	if len(t) == 0 || t[0] != '<' {
		return nil, "", nil
	}
	doc := etree.NewDocument()
	doc.ReadSettings.Permissive = false
	if err := doc.ReadFromBytes(body); err != nil {
		return nil, "", err
	}
	if deeperThan(&doc.Element, maxXMLDepth) {
		return nil, "", fmt.Errorf("elements nest more than %d levels deep", maxXMLDepth)
	}
	root := doc.Root()
	if root == nil || root.Tag != "Envelope" {
		return nil, "", nil
	}
	ns = root.NamespaceURI()
	if ns != envSOAP11 && ns != envSOAP12 {
		return nil, "", nil
	}
	for _, c := range root.ChildElements() {
		if c.Tag == "Body" && c.NamespaceURI() == ns {
			return c, ns, nil
		}
	}
	return nil, "", nil
}

func firstChild(el *etree.Element) *etree.Element {
	for _, c := range el.ChildElements() {
		return c
	}
	return nil
}

// fault turns a Fault element into the one error shape of both SOAP
// versions.
func fault(up string, f *etree.Element, envNS string, httpStatus int) *sdk.UpstreamError {
	var code, reason, actor string
	var subcodes []string
	var detail any
	child := func(el *etree.Element, name string) *etree.Element {
		for _, c := range el.ChildElements() {
			if c.Tag == name {
				return c
			}
		}
		return nil
	}
	localCode := func(s string) string {
		s = strings.TrimSpace(s)
		if i := strings.LastIndexByte(s, ':'); i >= 0 {
			return s[i+1:]
		}
		return s
	}
	version := "1.1"
	if envNS == envSOAP12 {
		version = "1.2"
		if c := child(f, "Code"); c != nil {
			if v := child(c, "Value"); v != nil {
				code = localCode(v.Text())
			}
			for s := child(c, "Subcode"); s != nil; s = child(s, "Subcode") {
				if v := child(s, "Value"); v != nil {
					subcodes = append(subcodes, localCode(v.Text()))
				}
				if len(subcodes) > 16 {
					break
				}
			}
		}
		if r := child(f, "Reason"); r != nil {
			if t := child(r, "Text"); t != nil {
				reason = strings.TrimSpace(t.Text())
			}
		}
		if r := child(f, "Role"); r != nil {
			actor = strings.TrimSpace(r.Text())
		}
		if d := child(f, "Detail"); d != nil {
			detail = normalizeAny(d)
		}
	} else {
		if c := child(f, "faultcode"); c != nil {
			code = localCode(c.Text())
			// Dotted 1.1 codes (Client.Auth) carry subcodes.
			if parts := strings.Split(code, "."); len(parts) > 1 {
				code, subcodes = parts[0], parts[1:]
			}
		}
		if r := child(f, "faultstring"); r != nil {
			reason = strings.TrimSpace(r.Text())
		}
		if a := child(f, "faultactor"); a != nil {
			actor = strings.TrimSpace(a.Text())
		}
		if d := child(f, "detail"); d != nil {
			detail = normalizeAny(d)
		}
	}
	fj := obj{"code": code, "reason": reason}
	if len(subcodes) > 0 {
		fj["subcodes"] = subcodes
	}
	if actor != "" {
		fj["actor"] = actor
	}
	if detail != nil {
		fj["detail"] = detail
	}
	d, _ := json.Marshal(obj{"fault": fj, "soap_version": version, "status_code": httpStatus})
	if reason == "" {
		reason = "(no reason given)"
	}
	status := code
	if status == "" {
		status = "Fault"
	}
	for _, c := range append([]string{code}, subcodes...) {
		if wsse.SecurityFault(c) {
			// The service refused the WS-Security header: the same call
			// fails the same way until the config changes.
			return &sdk.UpstreamError{
				Kind: sdk.KindUpstreamStatus, Upstream: up, Status: c, Detail: d, Rejected: true,
				Message: "SOAP security fault " + c + ": " + reason + " (the service refused the WS-Security header: check the entry's security config)",
			}
		}
	}
	return &sdk.UpstreamError{
		Kind: sdk.KindUpstreamStatus, Upstream: up, Status: status,
		Message: "SOAP fault " + status + ": " + reason, Detail: d,
		// Server / Receiver faults may be passing conditions; Client /
		// Sender faults refuse the request as such.
		Retryable: code == "Server" || code == "Receiver",
		Rejected:  code == "Client" || code == "Sender",
	}
}

// normalize converts an element to JSON guided by its type.
func normalize(el *etree.Element, t *xsdType) any {
	if isNil(el) {
		return nil
	}
	switch t.Kind {
	case kindSimple:
		v, _ := scalar(strings.TrimSpace(el.Text()), jsonKind(t.Base))
		if jsonKind(t.Base) == "string" {
			return el.Text()
		}
		return v
	case kindAny:
		return normalizeAny(el)
	}
	out := obj{}
	for _, a := range el.Attr {
		if a.Space == "xmlns" || (a.Space == "" && a.Key == "xmlns") || a.NamespaceURI() == nsXSI {
			continue
		}
		var at *xsdType
		for _, d := range t.Attrs {
			if d.Name == a.Key {
				at = d.Type
			}
		}
		if at != nil {
			out[attrPrefix+a.Key], _ = scalar(a.Value, jsonKind(at.Base))
		} else {
			out[attrPrefix+a.Key] = a.Value
		}
	}
	if t.Value != nil {
		v, _ := scalar(strings.TrimSpace(el.Text()), jsonKind(t.Value.Base))
		if jsonKind(t.Value.Base) == "string" {
			v = el.Text()
		}
		if len(out) == 0 && len(t.Attrs) == 0 {
			return v
		}
		out[valueKey] = v
	}
	fields := map[string]*xsdField{}
	for _, f := range t.Fields {
		fields[f.Name] = f
		if f.repeated() && f.Min > 0 {
			out[f.Name] = []any{}
		}
	}
	for _, c := range el.ChildElements() {
		f := fields[c.Tag]
		if f == nil {
			addRepeated(out, c.Tag, normalizeAny(c))
			continue
		}
		v := normalize(c, f.Type)
		if f.repeated() {
			arr, _ := out[f.Name].([]any)
			out[f.Name] = append(arr, v)
		} else {
			out[f.Name] = v
		}
	}
	return out
}

func isNil(el *etree.Element) bool {
	for _, a := range el.Attr {
		if a.Key == "nil" && a.NamespaceURI() == nsXSI {
			return a.Value == "true" || a.Value == "1"
		}
	}
	return false
}

// addRepeated sets out[k], turning a second occurrence into an array.
func addRepeated(out obj, k string, v any) {
	prev, ok := out[k]
	if !ok {
		out[k] = v
		return
	}
	if arr, ok := prev.([]any); ok {
		out[k] = append(arr, v)
		return
	}
	out[k] = []any{prev, v}
}

// normalizeAny converts an element without a schema: text-only elements
// become strings, others objects, repeated children arrays.
func normalizeAny(el *etree.Element) any {
	if isNil(el) {
		return nil
	}
	children := el.ChildElements()
	attrs := obj{}
	for _, a := range el.Attr {
		if a.Space == "xmlns" || (a.Space == "" && a.Key == "xmlns") || a.NamespaceURI() == nsXSI {
			continue
		}
		attrs[attrPrefix+a.Key] = a.Value
	}
	if len(children) == 0 {
		if len(attrs) == 0 {
			return el.Text()
		}
		if t := el.Text(); t != "" {
			attrs[valueKey] = t
		}
		return attrs
	}
	out := attrs
	for _, c := range children {
		addRepeated(out, c.Tag, normalizeAny(c))
	}
	return out
}

// maxXMLDepth bounds how deep the elements of an answer nest, the
// Envelope being level 1: normalisation descends one level at a time, and
// a deeper answer is refused before it.
const maxXMLDepth = 256

// deeperThan tells whether elements nest more than max levels below el
// (a document: its root is level 1).
func deeperThan(el *etree.Element, max int) bool {
	type frame struct {
		el    *etree.Element
		depth int
	}
	stack := []frame{{el, 0}}
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if f.depth > max {
			return true
		}
		for _, t := range f.el.Child {
			if c, ok := t.(*etree.Element); ok {
				stack = append(stack, frame{c, f.depth + 1})
			}
		}
	}
	return false
}

// result turns an answer into a tool result or an error.
func result(ctx context.Context, op *operation, up string, status int, ctype string, body []byte) (*sdk.Result, error) {
	b, envNS, perr := parseEnvelope(body)
	if b != nil {
		if f := firstChild(b); f != nil && f.Tag == "Fault" && f.NamespaceURI() == envNS {
			return nil, fault(up, f, envNS, status)
		}
	}
	if status < 200 || status > 299 {
		d, _ := json.Marshal(obj{"status_code": status, "content_type": ctype})
		return nil, &sdk.UpstreamError{
			Kind: sdk.KindUpstreamStatus, Upstream: up, Status: strconv.Itoa(status),
			Message: fmt.Sprintf("upstream answered HTTP %d without a SOAP fault", status),
			Body:    sdk.Excerpt(ctx, body), Detail: d,
			Retryable: httpadapter.RetryableStatus(status),
			Rejected:  httpadapter.RejectedStatus(status),
		}
	}
	if b == nil {
		if op.OutOptional && len(bytes.TrimSpace(body)) == 0 {
			return &sdk.Result{Structured: json.RawMessage(`{}`)}, nil
		}
		what := "not XML"
		if perr != nil {
			what = "not XML that can be read (" + strings.TrimPrefix(perr.Error(), "etree: ") + ")"
		} else if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '<' {
			what = "XML but not a SOAP envelope"
		} else if len(t) == 0 {
			what = "empty"
		}
		return nil, &sdk.UpstreamError{Kind: sdk.KindBadResponse, Upstream: up,
			Message: "the answer is " + what + " (content type " + strconv.Quote(ctype) + ")", Body: sdk.Excerpt(ctx, body)}
	}
	var v any = obj{}
	if w := firstChild(b); w != nil {
		if op.Out != nil {
			v = normalize(w, op.Out.Type)
		} else {
			v = normalizeAny(w)
		}
	}
	if _, ok := v.(obj); !ok {
		v = obj{"result": v}
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, &sdk.UpstreamError{Kind: sdk.KindBadResponse, Upstream: up, Message: "the answer cannot be rendered as JSON"}
	}
	return &sdk.Result{Structured: out, ContentType: ctype}, nil
}
