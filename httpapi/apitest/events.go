package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/partnergiving/giving/httpapi"
)

// PayloadSchemas compiles the payload schema of every public event type, as
// GET /v1/event_types serves them (httpapi.EventTypes), with a JSON Schema
// validator of its own: the events a test sees are checked against the
// published catalogue, not against the structs they were made from.
var PayloadSchemas = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	out := map[string]*jsonschema.Schema{}
	for _, et := range httpapi.EventTypes() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(et.PayloadSchema))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", et.Type, err)
		}
		url := "urn:giving:event:" + et.Type
		if err := c.AddResource(url, doc); err != nil {
			return nil, fmt.Errorf("%s: %w", et.Type, err)
		}
		if out[et.Type], err = c.Compile(url); err != nil {
			return nil, fmt.Errorf("%s: %w", et.Type, err)
		}
	}
	return out, nil
})

// ValidateEvent checks one event envelope: its type is a public event type
// and its payload is valid against that type's published schema.
func ValidateEvent(envelope []byte) error {
	schemas, err := PayloadSchemas()
	if err != nil {
		return err
	}
	var env struct {
		EventType string          `json:"event_type"`
		Payload   json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(envelope, &env); err != nil {
		return fmt.Errorf("event %s: %w", envelope, err)
	}
	schema, ok := schemas[env.EventType]
	if !ok {
		return fmt.Errorf("event %s: %q is not a public event type", envelope, env.EventType)
	}
	payload, err := jsonschema.UnmarshalJSON(bytes.NewReader(env.Payload))
	if err != nil {
		return fmt.Errorf("event %s: payload: %w", envelope, err)
	}
	if err := schema.Validate(payload); err != nil {
		return fmt.Errorf("event %s: payload does not match the %s schema: %w", envelope, env.EventType, err)
	}
	return nil
}

// checkFeedEvents validates every event of a 200 answer of the feed or of
// GET /v1/events/{event_id}.
func checkFeedEvents(tb testing.TB, path string, body []byte) {
	tb.Helper()
	events := []json.RawMessage{body}
	if path == "/v1/events" {
		var page struct {
			Data []json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			tb.Errorf("GET %s: %v", path, err)
			return
		}
		events = page.Data
	}
	for _, ev := range events {
		if err := ValidateEvent(ev); err != nil {
			tb.Errorf("GET %s: %v", path, err)
		}
	}
}
