package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Examples of the catalogue's events, made from their payload schemas: an
// envelope each schema accepts, with ids of the form the service issues
// (a fixed body) and a fixed time. docs/events.md and the dashboard's
// catalogue show them; a test validates each against its schema.

// exampleTime is the time every example shows.
const exampleTime = "2026-11-21T15:04:07.203Z"

// exampleID is an id of the form the service issues, with a fixed body.
func exampleID(prefix string) string { return prefix + "_3MVRNirMdOL3TKR7B7s0qO1U6rp" }

// PayloadField is one field of a payload schema.
type PayloadField struct {
	Name        string `json:"-"`
	Type        any    `json:"type"`
	Pattern     string `json:"pattern"`
	Enum        []any  `json:"enum"`
	Examples    []any  `json:"examples"`
	Description string `json:"description"`
}

var idPattern = regexp.MustCompile(`^\^([a-z]+)_\[0-9A-Za-z\]\{27\}\$$`)

// IDPrefix is the id prefix (ch, en, ...) when the field is an id, else "".
func (f PayloadField) IDPrefix() string {
	if m := idPattern.FindStringSubmatch(f.Pattern); m != nil {
		return m[1]
	}
	return ""
}

// TypeName is the field's JSON type (the first, when it may have several).
func (f PayloadField) TypeName() string {
	if s, ok := f.Type.(string); ok {
		return s
	}
	if list, ok := f.Type.([]any); ok && len(list) > 0 {
		return fmt.Sprint(list[0])
	}
	return "any"
}

// Example is a value the field's schema accepts.
func (f PayloadField) Example() any {
	switch {
	case len(f.Enum) > 0:
		return f.Enum[0]
	case len(f.Examples) > 0:
		return f.Examples[0]
	case f.IDPrefix() != "":
		return exampleID(f.IDPrefix())
	case strings.Contains(f.Pattern, `T\d{2}:`):
		return exampleTime
	case f.TypeName() == "number":
		return json.Number("25.50")
	case f.TypeName() == "integer":
		return 1
	}
	return "trc_" + strings.TrimPrefix(exampleID("x"), "x_")
}

// Fields reads the payload schema's fields, in the schema's order (the
// order the service writes them).
func (et EventType) Fields() ([]PayloadField, error) {
	var top struct {
		Properties json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(et.PayloadSchema, &top); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(top.Properties))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var out []PayloadField
	for dec.More() {
		name, err := dec.Token()
		if err != nil {
			return nil, err
		}
		f := PayloadField{Name: fmt.Sprint(name)}
		if err := dec.Decode(&f); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// Example is an envelope of the type, its payload made of each field's
// example; an endpoint's own events belong to no church.
func (et EventType) Example() ([]byte, error) {
	fields, err := et.Fields()
	if err != nil {
		return nil, err
	}
	payload := make([]string, len(fields))
	for i, f := range fields {
		v, err := json.Marshal(f.Example())
		if err != nil {
			return nil, err
		}
		payload[i] = fmt.Sprintf("%q:%s", f.Name, v)
	}
	church := exampleID("ch")
	if strings.HasPrefix(et.Type, "webhook_endpoint.") {
		church = ""
	}
	return json.Marshal(struct {
		ID         string          `json:"event_id"`
		Type       string          `json:"event_type"`
		OccurredAt string          `json:"occurred_at"`
		ChurchID   string          `json:"church_id"`
		Payload    json.RawMessage `json:"payload"`
	}{exampleID("evt"), et.Type, exampleTime, church, json.RawMessage("{" + strings.Join(payload, ",") + "}")})
}
