package domain_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/partnergiving/giving/domain"
)

func TestParseHundredths(t *testing.T) {
	tests := []struct {
		in   string
		want domain.Hundredths
		ok   bool
	}{
		{"10.10", 1010, true},
		{"10.1", 1010, true},
		{"10", 1000, true},
		{"0", 0, true},
		{"-0", 0, true},
		{"0.01", 1, true},
		{"-1", -100, true},
		{"-1.5", -150, true},
		{"10.100", 1010, true}, // trailing zeros are still exact cents
		{"92233720368547758.07", 9223372036854775807, true}, // every int64 of cents reads back
		{"92233720368547758.08", 0, false},
		{"-92233720368547758.09", 0, false},
		{"-92233720368547758.08", math.MinInt64, true},
		{"-0.00", 0, true},
		{"1.10000", 110, true},
		{"184467440737095516.15", 0, false},
		{"10.101", 0, false},
		{"0.001", 0, false},
		{"1e2", 0, false},
		{"1E2", 0, false},
		{"1e400", 0, false},
		{"+1", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{`"10"`, 0, false},
		{"", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1/4", 0, false},
		{"0x10", 0, false},
		{"0b11", 0, false},
		{"010", 0, false},
		{"00.5", 0, false},
		{".5", 0, false},
		{"5.", 0, false},
		{"1_000", 0, false},
		{"-", 0, false},
		{"1.2.3", 0, false},
		{"123456789012345678901234567890", 0, false},
	}
	for _, tt := range tests {
		got, ok := domain.ParseHundredths(json.Number(tt.in))
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParseHundredths(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestHundredthsText(t *testing.T) {
	tests := []struct {
		in           domain.Hundredths
		str, trimmed string
	}{
		{1010, "10.10", "10.1"},
		{300, "3.00", "3"},
		{350, "3.50", "3.5"},
		{5, "0.05", "0.05"},
		{0, "0.00", "0"},
		{-150, "-1.50", "-1.5"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.str {
			t.Errorf("%d.String() = %q, want %q", tt.in, got, tt.str)
		}
		if got := tt.in.Trimmed(); got != tt.trimmed {
			t.Errorf("%d.Trimmed() = %q, want %q", tt.in, got, tt.trimmed)
		}
	}
}

func TestHundredthsJSON(t *testing.T) {
	b, err := json.Marshal(struct {
		V domain.Hundredths `json:"v"`
	}{1010})
	if err != nil || string(b) != `{"v":10.10}` {
		t.Fatalf("marshal = %s, %v", b, err)
	}
	var v struct {
		V domain.Hundredths `json:"v"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.V != 1010 {
		t.Fatalf("round trip = %d, %v", v.V, err)
	}
	for _, bad := range []string{`{"v":"10"}`, `{"v":10.101}`, `{"v":1e400}`, `{"v":true}`} {
		if err := json.Unmarshal([]byte(bad), &v); err == nil {
			t.Errorf("unmarshal %s: accepted", bad)
		}
	}
}

func TestParseGiving(t *testing.T) {
	tests := []struct {
		mode, value string
		want        domain.Giving
		field       string // empty when valid
	}{
		{"pct", "10.10", domain.Giving{Mode: domain.ModePercent, Value: 1010}, ""},
		{"pct", "100", domain.Giving{Mode: domain.ModePercent, Value: 10000}, ""},
		{"pct", "0.01", domain.Giving{Mode: domain.ModePercent, Value: 1}, ""},
		{"fixed", "25.50", domain.Giving{Mode: domain.ModeFixed, Value: 2550}, ""},
		{"fixed", "100000", domain.Giving{Mode: domain.ModeFixed, Value: 100_000_00}, ""},
		{"pct", "100.01", domain.Giving{}, "value"},
		{"pct", "10.101", domain.Giving{}, "value"},
		{"pct", "0", domain.Giving{}, "value"},
		{"pct", "-1", domain.Giving{}, "value"},
		{"pct", `"10"`, domain.Giving{}, "value"},
		{"pct", "1e400", domain.Giving{}, "value"},
		{"pct", "NaN", domain.Giving{}, "value"},
		{"fixed", "0", domain.Giving{}, "value"},
		{"fixed", "-1", domain.Giving{}, "value"},
		{"fixed", "10.101", domain.Giving{}, "value"},
		{"fixed", "100000.01", domain.Giving{}, "value"},
		{"fixed", "1e2", domain.Giving{}, "value"},
		{"percent", "10", domain.Giving{}, "mode"},
		{"", "10", domain.Giving{}, "mode"},
		{"PCT", "10", domain.Giving{}, "mode"},
	}
	for _, tt := range tests {
		got, ferr := domain.ParseGiving(tt.mode, json.Number(tt.value))
		switch {
		case tt.field == "" && ferr != nil:
			t.Errorf("ParseGiving(%q, %q): refused: %+v", tt.mode, tt.value, ferr)
		case tt.field == "" && got != tt.want:
			t.Errorf("ParseGiving(%q, %q) = %+v, want %+v", tt.mode, tt.value, got, tt.want)
		case tt.field != "" && (ferr == nil || ferr.Field != tt.field || ferr.Detail == ""):
			t.Errorf("ParseGiving(%q, %q) = %+v, %+v; want an error on %s", tt.mode, tt.value, got, ferr, tt.field)
		}
	}
}

func TestGivingWords(t *testing.T) {
	tests := []struct {
		g    domain.Giving
		want string
	}{
		{domain.Giving{Mode: domain.ModePercent, Value: 300}, "3% of each paycheck"},
		{domain.Giving{Mode: domain.ModePercent, Value: 1250}, "12.5% of each paycheck"},
		{domain.Giving{Mode: domain.ModeFixed, Value: 2550}, "$25.50 from each paycheck"},
		{domain.Giving{Mode: domain.ModeFixed, Value: 2500}, "$25.00 from each paycheck"},
	}
	for _, tt := range tests {
		if got := tt.g.Words(); got != tt.want {
			t.Errorf("%+v.Words() = %q, want %q", tt.g, got, tt.want)
		}
	}
}

func TestHundredthsAddReportsOverflow(t *testing.T) {
	if sum, ok := domain.Hundredths(100).Add(250); !ok || sum != 350 {
		t.Fatalf("100 + 250 = %d, %v", sum, ok)
	}
	if _, ok := domain.Hundredths(math.MaxInt64 - 1).Add(2); ok {
		t.Fatal("an overflowing sum was reported as fitting")
	}
	if _, ok := domain.Hundredths(math.MinInt64 + 1).Add(-2); ok {
		t.Fatal("an underflowing sum was reported as fitting")
	}
}
