package simulators

import (
	"encoding/json"
	"testing"
)

// Dollars become cents by moving the point, never through a float; what
// is not a plain decimal reaches the bank's transfer as it is, for the edge
// to refuse.
func TestCents(t *testing.T) {
	for dollars, want := range map[string]string{
		"10.10": "1010", "10.1": "1010", "7": "700", "0.01": "1", "99999999.99": "9999999999",
		"10.101": "1010.1", "0.001": "0.1", "0": "0", "-1": "-100", "-0.5": "-50",
		"1e400": "1e400", "1E2": "1E2", `"10"`: `"10"`, "true": "true",
	} {
		if got := cents(json.RawMessage(dollars)); got != want {
			t.Errorf("cents(%s) = %s, want %s", dollars, got, want)
		}
	}
}
