package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sync"

	"github.com/gorilla/mux"
	"github.com/invopop/jsonschema"

	"github.com/partnergiving/giving/domain"
)

// The event catalogue partners can read, GET /v1/event_types: every public
// event type, when it happens, and a standalone JSON Schema (draft 2020-12,
// no reference outside itself) of its payload. The schema is derived by
// reflection from the domain payload struct, which is the allowlist of what
// the event can carry, its field tags adding patterns, enums and
// descriptions. It is the one source of the payload schemas: the OpenAPI
// document's Event variants and webhooks carry the same ones (a test keeps
// them equal), and every event the test suite produces is validated
// against them.

// EventType is one entry of the catalogue.
type EventType struct {
	Type          string          `json:"type"`
	Summary       string          `json:"summary"`
	PayloadSchema json.RawMessage `json:"payload_schema"`
}

// EventTypes lists every public event type, sorted by type.
var EventTypes = sync.OnceValue(func() []EventType {
	types := domain.PublicEventTypes()
	out := make([]EventType, len(types))
	for i, typ := range types {
		spec, _ := domain.EventTypeSpec(typ)
		schema, err := json.Marshal(payloadSchema(spec))
		if err != nil {
			panic(fmt.Sprintf("httpapi: schema of %s: %v", typ, err))
		}
		out[i] = EventType{Type: typ, Summary: spec.Summary, PayloadSchema: schema}
	}
	return out
})

var hundredths = reflect.TypeFor[domain.Hundredths]()

// payloadSchema reflects one payload struct: every field required (payload
// fields are never omitted), nothing else allowed, decimals as numbers.
func payloadSchema(spec domain.EventSpec) *jsonschema.Schema {
	r := &jsonschema.Reflector{
		Anonymous:      true,
		DoNotReference: true,
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			if t == hundredths {
				// Hundredths is written as a decimal number with two
				// fraction digits (2.50), not as its integer.
				return &jsonschema.Schema{Type: "number"}
			}
			return nil
		},
	}
	s := r.ReflectFromType(reflect.TypeOf(spec.New()).Elem())
	s.Title = spec.Type + " payload"
	return s
}

var eventTypesBody = sync.OnceValue(func() []byte {
	body, err := json.Marshal(map[string]any{"data": EventTypes()})
	if err != nil {
		panic("httpapi: event types: " + err.Error())
	}
	return body
})

func (s *Server) listEventTypes(w http.ResponseWriter, r *http.Request) {
	writeJSONBytes(w, http.StatusOK, eventTypesBody())
}

func (s *Server) getEvent(w http.ResponseWriter, r *http.Request) {
	body, err := s.app.Event(r.Context(), partnerID(r), mux.Vars(r)["id"])
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSONBytes(w, http.StatusOK, body)
}
