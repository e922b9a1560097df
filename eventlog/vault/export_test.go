package vault

import "time"

// SetNewKeyTimeoutForTest shortens the bound on making a phone key.
func SetNewKeyTimeoutForTest(d time.Duration) (restore func()) {
	old := newKeyTimeout
	newKeyTimeout = d
	return func() { newKeyTimeout = old }
}
