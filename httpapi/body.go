package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/partnergiving/giving/domain"
)

// MaxBody is the largest request body accepted.
const MaxBody = 1 << 20

// readBody reads the whole request body, refusing more than MaxBody and
// anything but JSON. An empty body is allowed for routes that take none.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *domain.Problem) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, &domain.ProblemPayloadTooLarge
	}
	if err != nil {
		return nil, &domain.ProblemMalformedJSON
	}
	if len(body) > 0 && !isJSON(r.Header.Get("Content-Type")) {
		return nil, &domain.ProblemUnsupportedMedia
	}
	return body, nil
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// decodeJSON decodes the (already size-checked) body into v strictly: one
// JSON object, no unknown fields, every field of the right type.
func decodeJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return domain.ProblemMalformedJSON.New("The body could not be read.")
	}
	return decodeStrict(body, v)
}

func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return domain.ProblemMalformedJSON.New("The request body is empty; a JSON object is required.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
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
