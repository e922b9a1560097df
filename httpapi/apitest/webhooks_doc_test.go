package apitest_test

import (
	"slices"
	"testing"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// The event types an endpoint may subscribe to are documented exactly:
// adding a public event type without listing it fails here.
func TestWebhookEventTypesAreDocumented(t *testing.T) {
	doc := apitest.Document(t)
	s := doc.Components.Schemas["WebhookEventType"]
	if s == nil || s.Value == nil {
		t.Fatal("components.schemas.WebhookEventType is missing")
	}
	var got []string
	for _, v := range s.Value.Enum {
		got = append(got, v.(string))
	}
	want := append([]string{domain.AllEventTypes}, domain.SubscribableEventTypes()...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("WebhookEventType enum %v, want %v", got, want)
	}
}
