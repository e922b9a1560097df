package eventlog

import (
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/partnergiving/giving/secrets"
)

// NATSTokenFile is where the embedded NATS server keeps the token every
// client must present.
const NATSTokenFile = "nats.token"

// NATSToken returns the token the embedded NATS server serving dataDir
// requires of its clients. Like the master key, it is for whoever may read
// the data directory: the service and the operator CLI. The server makes it
// on its first start (ensureNATSToken); before that there is none.
func NATSToken(dataDir string) (string, error) {
	key, err := secrets.ReadKeyFile(filepath.Join(dataDir, NATSTokenFile))
	if err != nil {
		return "", fmt.Errorf("nats token: %w", err)
	}
	return hex.EncodeToString(key), nil
}

// ensureNATSToken returns the data directory's NATS token, generating it
// there with mode 0600 on first use.
func ensureNATSToken(dataDir string) (string, error) {
	if dataDir == "" {
		return "", errors.New("nats token: no data directory to keep one in")
	}
	key, err := secrets.KeyFile(filepath.Join(dataDir, NATSTokenFile))
	if err != nil {
		return "", fmt.Errorf("nats token: %w", err)
	}
	return hex.EncodeToString(key), nil
}
