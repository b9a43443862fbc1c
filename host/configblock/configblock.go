// Package configblock reads a config block declared once as a tagged
// struct: an endpoint's server_card (host/servercard) and mesh
// (host/mesh) blocks, a rate limit (host/ratelimit). The struct's json
// tags name the fields of the JSON config and the Caddyfile
// subdirectives, its jsonschema tags document them, an enum tag lists a
// field's values, a default tag gives the value of an empty one (Value);
// a string or int field takes one value, a []string field one or more, a
// bool field none (true) or one (true or false). Fields lists them for
// docs and messages, Set sets one from a subdirective's values. The
// block's own package checks the values (its Check).
package configblock

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Field is one field of a block's struct.
type Field struct {
	// Name is the field's name in the JSON config and the Caddyfile, Doc
	// its documentation.
	Name, Doc string
	// Enum lists the values the field may take, nil for any.
	Enum []string
	// List: the field takes several values.
	List bool
	// Default is the value an empty field takes (its default tag), ""
	// for none; Doc ends by saying it.
	Default string
	// Kind is the field's Go kind: reflect.String (also for a list),
	// reflect.Int or reflect.Bool.
	Kind  reflect.Kind
	index int
}

// Fields lists the string, []string, int and bool fields of T, a struct,
// in declaration order.
func Fields[T any]() []Field {
	t := reflect.TypeFor[T]()
	out := make([]Field, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		list := f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.String
		kind := f.Type.Kind()
		if list {
			kind = reflect.String
		}
		if name == "" || name == "-" || kind != reflect.String && kind != reflect.Int && kind != reflect.Bool {
			continue
		}
		fd := Field{Name: name, Doc: f.Tag.Get("jsonschema"), List: list, Kind: kind, Default: f.Tag.Get("default"), index: i}
		if fd.Default != "" {
			fd.Doc += " Default: " + fd.Default + "."
		}
		if e := f.Tag.Get("enum"); e != "" {
			fd.Enum = strings.Split(e, ",")
		}
		out = append(out, fd)
	}
	return out
}

// Names lists the fields' names, for a message about an unknown one.
func Names[T any]() string {
	var names []string
	for _, f := range Fields[T]() {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

// Set sets the field named name of c to vs: one value, or one or more
// for a list field (appended), none (true) or one for a bool. The error
// names an unknown field (and the known ones), a wrong number of values
// or a value that is not a number (an int) or true or false (a bool).
func Set[T any](c *T, name string, vs []string) error {
	for _, f := range Fields[T]() {
		if f.Name != name {
			continue
		}
		switch {
		case f.List && len(vs) == 0:
			return fmt.Errorf("%s: want one or more values", name)
		case f.Kind == reflect.Bool && len(vs) > 1:
			return fmt.Errorf("%s: want no value (true), or true or false", name)
		case !f.List && f.Kind != reflect.Bool && len(vs) != 1:
			return fmt.Errorf("%s: want one value", name)
		}
		fv := reflect.ValueOf(c).Elem().Field(f.index)
		switch {
		case f.List:
			fv.Set(reflect.AppendSlice(fv, reflect.ValueOf(vs)))
		case f.Kind == reflect.Int:
			n, err := strconv.Atoi(vs[0])
			if err != nil {
				return fmt.Errorf("%s: want a whole number, got %q", name, vs[0])
			}
			fv.SetInt(int64(n))
		case f.Kind == reflect.Bool:
			b := true
			if len(vs) == 1 {
				var err error
				if b, err = strconv.ParseBool(vs[0]); err != nil {
					return fmt.Errorf("%s: want true or false, got %q", name, vs[0])
				}
			}
			fv.SetBool(b)
		default:
			fv.SetString(vs[0])
		}
		return nil
	}
	return fmt.Errorf("unrecognized option %q (%s)", name, Names[T]())
}

// Value is the value of field f of c: its own, or its default when empty.
func Value[T any](c *T, name string) string {
	for _, f := range Fields[T]() {
		if f.Name == name && !f.List && f.Kind == reflect.String {
			if v := reflect.ValueOf(c).Elem().Field(f.index).String(); v != "" {
				return v
			}
			return f.Default
		}
	}
	return ""
}

// Expand replaces the value v of every string field of c with expand(v).
func Expand[T any](c *T, expand func(string) string) {
	v := reflect.ValueOf(c).Elem()
	for _, f := range Fields[T]() {
		fv := v.Field(f.index)
		if f.Kind != reflect.String {
			continue
		}
		if f.List {
			for j := range fv.Len() {
				fv.Index(j).SetString(expand(fv.Index(j).String()))
			}
			continue
		}
		fv.SetString(expand(fv.String()))
	}
}

// CheckEnums reports the first field of c whose value its enum tag does
// not list (an empty value is the field's default, not checked), naming
// the field, the values it takes and the value found.
func CheckEnums[T any](c *T) error {
	v := reflect.ValueOf(c).Elem()
	for _, f := range Fields[T]() {
		if f.Enum == nil || f.Kind != reflect.String {
			continue
		}
		vals := []string{}
		if fv := v.Field(f.index); f.List {
			for j := range fv.Len() {
				vals = append(vals, fv.Index(j).String())
			}
		} else if fv.String() != "" {
			vals = append(vals, fv.String())
		}
		for _, x := range vals {
			if !slices.Contains(f.Enum, x) {
				return fmt.Errorf("%s: must be %s, got %q", f.Name, strings.Join(f.Enum, " or "), x)
			}
		}
	}
	return nil
}
