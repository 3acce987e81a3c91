package httpapi

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// findPath walks body and returns the dotted path ("items.0.uploadId") of
// either the value whose token ends at or after byte offset off (off >= 0:
// where encoding/json reported a type error), or the first object member
// named unknown that t, the type being decoded into, has no field for.
// encoding/json reports only a member's name for unknown fields, and type
// errors without array indexes; this supplies the rest. ok is false when the
// walk did not find it.
func findPath(body []byte, t reflect.Type, off int64, unknown string) (path string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	f := finder{dec: dec, off: off, unknown: unknown}
	return f.value(t, "")
}

type finder struct {
	dec     *json.Decoder
	off     int64
	unknown string
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// value reads one value at path, whose Go type is t (nil when unknown).
func (f *finder) value(t reflect.Type, path string) (string, bool) {
	t = concrete(t)
	tok, err := f.dec.Token()
	if err != nil {
		return "", false
	}
	if f.off >= 0 && f.dec.InputOffset() >= f.off {
		return path, true
	}
	switch tok {
	case json.Delim('{'):
		var fields map[string]reflect.Type
		var elem reflect.Type
		switch {
		case t != nil && t.Kind() == reflect.Struct:
			fields = map[string]reflect.Type{}
			structFields(t, fields, 0)
		case t != nil && t.Kind() == reflect.Map:
			elem = t.Elem()
		}
		for f.dec.More() {
			k, err := f.dec.Token()
			if err != nil {
				return "", false
			}
			key, _ := k.(string)
			child := elem
			if fields != nil {
				ft, known := lookupField(fields, key)
				if !known && f.unknown != "" && key == f.unknown {
					return join(path, key), true
				}
				child = ft
			}
			if p, ok := f.value(child, join(path, key)); ok {
				return p, true
			}
		}
		_, _ = f.dec.Token() // '}'
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; f.dec.More(); i++ {
			if p, ok := f.value(elem, join(path, strconv.Itoa(i))); ok {
				return p, true
			}
		}
		_, _ = f.dec.Token() // ']'
	}
	return "", false
}

// concrete strips pointers and returns nil for types whose JSON form is
// decided by custom unmarshalling or is not constrained (interfaces).
func concrete(t reflect.Type) reflect.Type {
	if t == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Interface {
		return nil
	}
	if p := reflect.PointerTo(t); p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler) {
		return nil
	}
	return t
}

// structFields collects the JSON member names of struct t as encoding/json
// sees them, embedded structs promoted.
func structFields(t reflect.Type, out map[string]reflect.Type, depth int) {
	if depth > 8 {
		return
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if sf.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				structFields(et, out, depth+1)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if _, dup := out[name]; !dup {
			out[name] = ft
		}
	}
}

// lookupField matches key as encoding/json does: exactly, else ignoring case.
func lookupField(fields map[string]reflect.Type, key string) (reflect.Type, bool) {
	if ft, ok := fields[key]; ok {
		return ft, true
	}
	for name, ft := range fields {
		if strings.EqualFold(name, key) {
			return ft, true
		}
	}
	return nil, false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
