package domain

import (
	"encoding/json"
	"fmt"
)

// Mode is how a donor's gift is configured.
type Mode string

// The giving modes.
const (
	// ModePercent gives a percentage of each paycheck: value above 0 and at
	// most 100, with at most two decimals.
	ModePercent Mode = "pct"
	// ModeFixed gives a fixed dollar amount per paycheck: value above 0 and
	// at most MaxFixedPerPaycheck, in exact cents.
	ModeFixed Mode = "fixed"
)

// MaxFixedPerPaycheck bounds a fixed gift: $100,000.00 per paycheck.
const MaxFixedPerPaycheck Hundredths = 100_000_00

// Giving is a configured gift: a mode and its value in hundredths (basis
// points for pct, cents for fixed).
type Giving struct {
	Mode  Mode       `json:"mode"`
	Value Hundredths `json:"value"`
}

// ParseGiving validates mode and value together. Errors name the field.
func ParseGiving(mode string, value json.Number) (Giving, *FieldError) {
	v, ok := ParseHundredths(value)
	switch Mode(mode) {
	case ModePercent:
		if !ok || v <= 0 || v > 100_00 {
			return Giving{}, &FieldError{Field: "value", Detail: "for mode pct, must be above 0 and at most 100, with at most 2 decimals"}
		}
	case ModeFixed:
		if !ok || v <= 0 || v > MaxFixedPerPaycheck {
			return Giving{}, &FieldError{Field: "value", Detail: fmt.Sprintf("for mode fixed, must be a dollar amount above 0 and at most %s, in exact cents", MaxFixedPerPaycheck)}
		}
	default:
		return Giving{}, &FieldError{Field: "mode", Detail: `must be "pct" or "fixed"`}
	}
	return Giving{Mode: Mode(mode), Value: v}, nil
}

// Words says the gift in words, as consent text shows it: "3% of each
// paycheck", "$25.50 from each paycheck".
func (g Giving) Words() string {
	if g.Mode == ModePercent {
		return g.Value.Trimmed() + "% of each paycheck"
	}
	return "$" + g.Value.String() + " from each paycheck"
}
