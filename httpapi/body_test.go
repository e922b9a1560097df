package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/partnergiving/giving/domain"
)

// A body's field errors are reported together: every unknown field and
// every field of the wrong type, in the order the body has them; faults of
// the body as a whole stay a single malformed-json problem.
func TestDecodeStrictReportsEveryFieldError(t *testing.T) {
	cases := []struct {
		name string
		body string
		into func() any
		code string
		want []domain.FieldError // for validation errors
	}{
		{"one unknown field", `{"churches":[],"color":"red"}`, newImportRequest, "validation-error",
			[]domain.FieldError{{Field: "color", Detail: "is not a known field"}}},
		{"unknown fields and a wrong type", `{"color":"red","churches":"x","size":2}`, newImportRequest, "validation-error",
			[]domain.FieldError{
				{Field: "color", Detail: "is not a known field"},
				{Field: "churches", Detail: "must be an array, not string"},
				{Field: "size", Detail: "is not a known field"},
			}},
		{"several wrong types and an unknown field", `{"church_id":5,"donor_phone":true,"mode":"pct","colour":"x","redirect_url":[]}`, newSessionRequest, "validation-error",
			[]domain.FieldError{
				{Field: "church_id", Detail: "must be a string, not number"},
				{Field: "donor_phone", Detail: "must be a string, not bool"},
				{Field: "colour", Detail: "is not a known field"},
				{Field: "redirect_url", Detail: "must be a string, not array"},
			}},
		{"a repeated unknown field once", `{"x":1,"churches":[],"x":2}`, newImportRequest, "validation-error",
			[]domain.FieldError{{Field: "x", Detail: "is not a known field"}}},
		{"case-insensitive match is no unknown field", `{"CHURCHES":"x","extra":null}`, newImportRequest, "validation-error",
			[]domain.FieldError{
				{Field: "churches", Detail: "must be an array, not string"},
				{Field: "extra", Detail: "is not a known field"},
			}},
		{"a field error then broken JSON", `{"color":"red","churches":[`, newImportRequest, "malformed-json", nil},
		{"a field error then a syntax error", `{"color":"red","churches":x}`, newImportRequest, "malformed-json", nil},
		{"not an object", `[]`, newImportRequest, "malformed-json", nil},
		{"empty", ` `, newImportRequest, "malformed-json", nil},
		{"two values", `{"churches":[]} {}`, newImportRequest, "malformed-json", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeStrict([]byte(tc.body), tc.into())
			var de *domain.Error
			if !errors.As(err, &de) {
				t.Fatalf("want a domain error, got %v", err)
			}
			if string(de.Code) != tc.code {
				t.Fatalf("code %q, want %q (%v)", de.Code, tc.code, err)
			}
			if !reflect.DeepEqual(de.Fields, tc.want) {
				t.Fatalf("fields\n got %+v\nwant %+v", de.Fields, tc.want)
			}
		})
	}
	var ok importRequest
	if err := decodeStrict([]byte(`{"churches":[{"name":"a"}]}`), &ok); err != nil || ok.Churches == nil || len(*ok.Churches) != 1 {
		t.Fatalf("a good body: %v %+v", err, ok)
	}
}

func newImportRequest() any  { return &importRequest{} }
func newSessionRequest() any { return &sessionRequest{} }

// A 415 says what the service expects and what it got, as an ordinary
// problem; the other body faults keep their answers.
func TestReadBodyProblems(t *testing.T) {
	cases := []struct {
		contentType string
		body        string
		status      int
		detail      string
	}{
		{"text/plain", `{}`, 415, "Send the body as JSON with Content-Type: application/json; got text/plain."},
		{"Text/Plain; charset=utf-8", `{}`, 415, "Send the body as JSON with Content-Type: application/json; got text/plain."},
		{"application/x-www-form-urlencoded", `a=b`, 415, "Send the body as JSON with Content-Type: application/json; got application/x-www-form-urlencoded."},
		{"", `{}`, 415, "Send the body as JSON with Content-Type: application/json; got no Content-Type."},
		{"json, please <b>", `{}`, 415, "Send the body as JSON with Content-Type: application/json; got a Content-Type that is not a media type."},
		{"application/json", strings.Repeat(" ", MaxBody+1), 413, "Payload too large."},
	}
	for _, tc := range cases {
		req := httptest.NewRequest(http.MethodPost, "/v1/churches/import", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.contentType)
		rec := httptest.NewRecorder()
		_, err := readBody(rec, req)
		if err == nil {
			t.Fatalf("%q: accepted", tc.contentType)
		}
		writeError(rec, req, err)
		var p problem
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
			t.Fatalf("%q: %v", tc.contentType, err)
		}
		if rec.Code != tc.status || p.Status != tc.status || p.Detail != tc.detail {
			t.Errorf("%q: %d %q, want %d %q", tc.contentType, rec.Code, p.Detail, tc.status, tc.detail)
		}
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8"} {
		req := httptest.NewRequest(http.MethodPost, "/v1/churches/import", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", ct)
		if body, err := readBody(httptest.NewRecorder(), req); err != nil || string(body) != `{}` {
			t.Errorf("%q refused: %v", ct, err)
		}
	}
	// An empty body needs no Content-Type (routes that take none).
	req := httptest.NewRequest(http.MethodPost, "/v1/webhook_endpoints/we_1/test", nil)
	if _, err := readBody(httptest.NewRecorder(), req); err != nil {
		t.Errorf("empty body: %v", err)
	}
}
