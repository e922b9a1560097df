package domain

import (
	"reflect"
	"testing"
	"time"
)

// parseTime reads what time.Parse reads, to the same time or the same
// error.
func FuzzParseTimeIsTimeParse(f *testing.F) {
	for _, seed := range []string{
		"2026-11-24T01:02:03.456Z", "0000-01-01T00:00:00.000Z", "9999-12-31T23:59:59.999Z",
		"2024-02-29T00:00:00.000Z", "2026-02-29T00:00:00.000Z", "2026-04-31T00:00:00.000Z", "2026-04-30T00:00:00.000Z",
		"2026-00-10T00:00:00.000Z", "2026-13-10T00:00:00.000Z", "2026-11-00T00:00:00.000Z",
		"2026-11-24T24:00:00.000Z", "2026-11-24T23:60:00.000Z", "2026-11-24T23:59:60.000Z",
		"2026-11-24T01:02:03.45Z", "2026-11-24T01:02:03.4567Z", "2026-11-24T01:02:03.456+", "2026-11-24 01:02:03.456Z",
		"2026-1a-24T01:02:03.456Z", "-026-11-24T01:02:03.456Z", "yesterday", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseTime([]byte(s))
		want, wantErr := time.Parse(TimeLayout, s)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("%q: error %v, time.Parse's %v", s, err, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %v, time.Parse's %v", s, got, want)
		}
	})
}
