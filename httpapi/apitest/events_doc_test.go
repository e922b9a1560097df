package apitest_test

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// Every public event type is documented for both channels: as a variant of
// the feed's Event schema and as a webhook, and its payload schema lists
// exactly the fields of the domain payload struct, which is the allowlist of
// what the event can carry. Adding an event type without documenting it
// fails here.
func TestEveryPublicEventTypeIsDocumented(t *testing.T) {
	doc := apitest.Document(t)
	event := doc.Components.Schemas["Event"]
	if event == nil || event.Value == nil {
		t.Fatal("components.schemas.Event is missing")
	}
	variants := map[string]*openapi3.Schema{}
	for _, ref := range event.Value.OneOf {
		variants[eventTypeConst(t, ref.Value)] = ref.Value
	}
	for _, typ := range domain.PublicEventTypes() {
		t.Run(typ, func(t *testing.T) {
			variant := variants[typ]
			if variant == nil {
				t.Fatalf("Event.oneOf has no variant with event_type const %q", typ)
			}
			if m := event.Value.Discriminator; m == nil || m.Mapping[typ].Ref == "" {
				t.Errorf("Event.discriminator.mapping lacks %q", typ)
			}
			checkEnvelope(t, variant)
			checkPayload(t, typ, variant.Properties["payload"].Value)
			checkWebhook(t, doc, typ)
		})
	}
	if len(variants) != len(domain.PublicEventTypes()) {
		t.Errorf("Event.oneOf documents %d types, the domain has %d public ones", len(variants), len(domain.PublicEventTypes()))
	}
}

func eventTypeConst(t *testing.T, s *openapi3.Schema) string {
	t.Helper()
	p := s.Properties["event_type"]
	if p == nil || p.Value == nil {
		t.Fatal("an Event variant has no event_type")
	}
	c, _ := p.Value.Const.(string)
	return c
}

func checkEnvelope(t *testing.T, s *openapi3.Schema) {
	t.Helper()
	want := []string{"church_id", "event_id", "event_type", "occurred_at", "payload"}
	req := append([]string(nil), s.Required...)
	sort.Strings(req)
	if strings.Join(req, ",") != strings.Join(want, ",") || strings.Join(keys(s.Properties), ",") != strings.Join(want, ",") {
		t.Errorf("envelope fields %v required %v, want exactly %v", keys(s.Properties), req, want)
	}
	if s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has {
		t.Error("envelope must set additionalProperties: false")
	}
}

func checkPayload(t *testing.T, typ string, s *openapi3.Schema) {
	t.Helper()
	spec, _ := domain.EventTypeSpec(typ)
	fields := jsonFields(reflect.TypeOf(spec.New()).Elem())
	if got := keys(s.Properties); strings.Join(got, ",") != strings.Join(fields, ",") {
		t.Errorf("payload schema lists %v, the payload struct allows %v", got, fields)
	}
	if s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has {
		t.Error("payload schema must set additionalProperties: false")
	}
}

func checkWebhook(t *testing.T, doc *openapi3.T, typ string) {
	t.Helper()
	item := doc.Webhooks[typ]
	if item == nil || item.Post == nil {
		t.Fatalf("webhooks[%q].post is missing", typ)
	}
	op := item.Post
	var signed bool
	for _, p := range op.Parameters {
		signed = signed || (p.Value.In == "header" && p.Value.Name == "Service-Signature" && p.Value.Required)
	}
	if !signed {
		t.Error("webhook does not require the Service-Signature header")
	}
	body := op.RequestBody.Value.Content.Get("application/json")
	if body == nil || body.Schema == nil || eventTypeConst(t, body.Schema.Value) != typ {
		t.Errorf("webhook body is not the %s envelope", typ)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// jsonFields lists the JSON names a struct serialises.
func jsonFields(rt reflect.Type) []string {
	var out []string
	for f := range rt.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
