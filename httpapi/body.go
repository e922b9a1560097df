package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/partnergiving/giving/domain"
)

// MaxBody is the largest request body accepted.
const MaxBody = 1 << 20

// readBody reads the whole request body, refusing more than MaxBody and
// anything but JSON. An empty body is allowed for routes that take none.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, domain.ProblemPayloadTooLarge.New("%s.", domain.ProblemPayloadTooLarge.Title)
	}
	if err != nil {
		return nil, domain.ProblemMalformedJSON.New("%s.", domain.ProblemMalformedJSON.Title)
	}
	if ct := r.Header.Get("Content-Type"); len(body) > 0 && !isJSON(ct) {
		return nil, domain.ProblemUnsupportedMedia.New(
			"Send the body as JSON with Content-Type: application/json; got %s.", describeContentType(ct))
	}
	return body, nil
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// describeContentType names the media type a refused request was sent with,
// for the 415's detail. Only a parsed media type (tokens, lower case) is
// echoed, never the raw header.
func describeContentType(contentType string) string {
	if strings.TrimSpace(contentType) == "" {
		return "no Content-Type"
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || len(mt) > 100 {
		return "a Content-Type that is not a media type"
	}
	return mt
}

// decodeJSON decodes the (already size-checked) body into v strictly: one
// JSON object, no unknown fields, every field of the right type. Every
// unknown field and every field of the wrong type is reported, together.
func decodeJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return domain.ProblemMalformedJSON.New("The body could not be read.")
	}
	return decodeStrict(body, v)
}

// decodeOptional decodes the body like decodeJSON, for routes whose body is
// optional: an empty body leaves v as it is.
func decodeOptional(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return domain.ProblemMalformedJSON.New("The body could not be read.")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return decodeStrict(body, v)
}

func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return domain.ProblemMalformedJSON.New("The request body is empty; a JSON object is required.")
	}
	dec := strictDecoder(body)
	if err := dec.Decode(v); err != nil {
		if fields := memberErrors(body, v); len(fields) > 0 {
			return (&domain.Validation{Fields: fields}).Err()
		}
		return jsonError(err)
	}
	if dec.More() {
		return domain.ProblemMalformedJSON.New("The body holds more than one JSON value.")
	}
	if _, err := dec.Token(); err != io.EOF {
		return domain.ProblemMalformedJSON.New("The body has trailing data after the JSON value.")
	}
	return nil
}

// memberErrors lists what is wrong with each member of body, a JSON object
// that failed to decode into v: the decoder reports only the first unknown
// field or wrong type, so each member is decoded again on its own, by the
// same rules, into a fresh value of v's type. It returns nil unless every
// failure is one of a named field, leaving the body's other faults (syntax,
// not an object) to jsonError.
func memberErrors(body []byte, v any) []domain.FieldError {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []domain.FieldError
	seen := map[domain.FieldError]bool{}
	for dec.More() {
		tok, err := dec.Token()
		key, isKey := tok.(string)
		var value json.RawMessage
		if err != nil || !isKey || dec.Decode(&value) != nil {
			return nil
		}
		name, _ := json.Marshal(key)
		member := append(append(append(append([]byte{'{'}, name...), ':'), value...), '}')
		err = strictDecoder(member).Decode(reflect.New(t.Elem()).Interface())
		if err == nil {
			continue
		}
		var de *domain.Error
		if !errors.As(jsonError(err), &de) || len(de.Fields) == 0 {
			return nil
		}
		for _, f := range de.Fields {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// strictDecoder reads JSON the one way request bodies are read: unknown
// fields refused, numbers kept as written.
func strictDecoder(data []byte) *json.Decoder {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	return dec
}

// jsonError turns a decoding failure into a problem that names the field
// when there is one.
func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return domain.ProblemMalformedJSON.New("The body must be a JSON object.")
		}
		var v domain.Validation
		v.Add(field, "must be %s, not %s", jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)
		return v.Err()
	case errors.As(err, &syntaxErr):
		return domain.ProblemMalformedJSON.New("Invalid JSON at byte %d.", syntaxErr.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return domain.ProblemMalformedJSON.New("The JSON body ends too early.")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		var v domain.Validation
		v.Add(strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`), "is not a known field")
		return v.Err()
	}
	return domain.ProblemMalformedJSON.New("The body is not valid JSON.")
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "a boolean"
	case "int", "int64", "float64", "uint64":
		return "a number"
	}
	return fmt.Sprintf("a %s", kind)
}
