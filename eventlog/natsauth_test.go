package eventlog_test

import (
	"strings"
	"testing"

	"github.com/partnergiving/giving/eventlog"
)

// RedactURL hides passwords and tokens in every URL it is given.
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                                  "",
		"nats://127.0.0.1:4222":             "nats://127.0.0.1:4222",
		"nats://giving:s3cret@nats-1:4222":  "nats://giving:xxxxx@nats-1:4222",
		"nats://tok3n@127.0.0.1:14222":      "nats://xxxxx@127.0.0.1:14222",
		"giving:s3cret@nats-1:4222":         "giving:xxxxx@nats-1:4222",
		"nats://giving:p@ss/w:rd@nats:4222": "nats://giving:xxxxx@nats:4222",
		"nats://a:s3cret@n1:4222, nats://a:s3cret@n2:4222,nats://n3:4222": "nats://a:xxxxx@n1:4222, nats://a:xxxxx@n2:4222,nats://n3:4222",
		"tls://giving:s3cret@[::1]:4222":                                  "tls://giving:xxxxx@[::1]:4222",
	} {
		got := eventlog.RedactURL(in)
		if got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "s3cret") || strings.Contains(got, "tok3n") || strings.Contains(got, "p@ss") {
			t.Errorf("RedactURL(%q) = %q shows a secret", in, got)
		}
	}
}
