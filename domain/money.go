package domain

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// Hundredths is a decimal with exactly two fraction digits, kept as an
// integer: cents for money, basis points for percentages. Floating point
// never touches an amount.
type Hundredths int64

// ParseHundredths reads a JSON number into hundredths. It refuses anything
// that is not a plain decimal number with at most two fraction digits, or
// that does not fit: "10.10" is 1010; "10.101", "1e400", "NaN" and strings
// are refused.
func ParseHundredths(n json.Number) (Hundredths, bool) {
	s := string(n)
	if len(s) > 24 || !plainDecimal(s) {
		return 0, false
	}
	body, negative := strings.CutPrefix(s, "-")
	whole, frac, _ := strings.Cut(body, ".")
	if len(frac) > 2 {
		if strings.Trim(frac[2:], "0") != "" {
			return 0, false // finer than a hundredth
		}
		frac = frac[:2]
	}
	for len(frac) < 2 {
		frac += "0"
	}
	// Read the magnitude as an unsigned count of hundredths, so that the
	// most negative int64 still reads back.
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || w > (math.MaxUint64-99)/100 {
		return 0, false
	}
	f, _ := strconv.ParseUint(frac, 10, 64)
	m := w*100 + f
	switch {
	case m <= math.MaxInt64 && negative:
		return -Hundredths(m), true
	case m <= math.MaxInt64:
		return Hundredths(m), true
	case m == 1<<63 && negative:
		return math.MinInt64, true
	}
	return 0, false
}

// Add sums two values, reporting false when the sum would not fit.
func (h Hundredths) Add(o Hundredths) (Hundredths, bool) {
	sum := h + o
	if (o > 0 && sum < h) || (o < 0 && sum > h) {
		return 0, false
	}
	return sum, true
}

// plainDecimal reports whether s is a JSON number without an exponent:
// an optional minus, an integer part without leading zeros, and an optional
// fraction. It keeps out what a looser number reader would accept ("1/4",
// "0x10", "1_000", ".5").
func plainDecimal(s string) bool {
	s = strings.TrimPrefix(s, "-")
	whole, frac, hasFrac := strings.Cut(s, ".")
	if !digits(whole) || (len(whole) > 1 && whole[0] == '0') {
		return false
	}
	return !hasFrac || digits(frac)
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// String writes the value with two fraction digits: 1010 is "10.10".
func (h Hundredths) String() string {
	sign := ""
	v := int64(h)
	if v < 0 {
		sign, v = "-", -v
	}
	return sign + strconv.FormatInt(v/100, 10) + "." + leftPad2(v%100)
}

// Trimmed writes the value without trailing zero fraction digits: 300 is
// "3", 350 is "3.5".
func (h Hundredths) Trimmed() string {
	s := strings.TrimRight(h.String(), "0")
	return strings.TrimSuffix(s, ".")
}

// MarshalJSON writes a JSON number with two fraction digits.
func (h Hundredths) MarshalJSON() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalJSON reads what MarshalJSON wrote (and any exact decimal).
func (h *Hundredths) UnmarshalJSON(b []byte) error {
	v, ok := ParseHundredths(json.Number(b))
	if !ok {
		return ProblemValidation.New("not an amount with at most two decimals: %s", b)
	}
	*h = v
	return nil
}

func leftPad2(v int64) string {
	if v < 10 {
		return "0" + strconv.FormatInt(v, 10)
	}
	return strconv.FormatInt(v, 10)
}
