package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Secrets holds the master key every other service secret is derived from:
// the vault's encryption key, the cursor MAC key, the donor-id hash key, the
// key sealing stored webhook secrets and idempotent responses. Instances that
// share a ledger must share the master key.
type Secrets struct {
	master []byte
}

// WebhookSecretPurpose names the sealer of webhook endpoint secrets: the API
// seals a new secret before it reaches the ledger, the dispatcher opens it to
// sign deliveries. The endpoint id is the associated data, so a sealed secret
// cannot be moved to another endpoint.
const WebhookSecretPurpose = "webhook-secret"

// masterKeyFile is where the embedded default keeps a generated master key.
const masterKeyFile = "master.key"

// Load takes the master key from configured (64 hex characters or
// base64 of 32 bytes) or, when that is empty, from the data directory,
// generating it there with mode 0600 on first use.
func Load(configured, dataDir string) (*Secrets, error) {
	if configured != "" {
		key, err := decodeKey(configured)
		if err != nil {
			return nil, fmt.Errorf("master key: %w", err)
		}
		return &Secrets{master: key}, nil
	}
	if dataDir == "" {
		return nil, errors.New("master key: neither configured nor a data directory to keep one in")
	}
	key, err := KeyFile(filepath.Join(dataDir, masterKeyFile))
	if err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}
	return &Secrets{master: key}, nil
}

// Read is Load for a process that must use the service's
// master key and never make one, such as an operator command reaching a
// running instance: the key is configured, or already in the data directory.
func Read(configured, dataDir string) (*Secrets, error) {
	if configured != "" || dataDir == "" {
		return Load(configured, dataDir)
	}
	key, err := ReadKeyFile(filepath.Join(dataDir, masterKeyFile))
	if err != nil {
		return nil, fmt.Errorf("master key: %w (give the service's with --master-key, or --data its data directory)", err)
	}
	return &Secrets{master: key}, nil
}

// KeyFile reads the 32-byte key kept at path, generating it there on first
// use (the master key here, the embedded NATS server's token in eventlog): readable by the owner only, and complete before it appears, so
// processes starting at once agree on one key and never read half of it.
func KeyFile(path string) ([]byte, error) {
	key, err := ReadKeyFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createKeyFile(path)
	}
	return key, err
}

// ReadKeyFile reads the 32-byte key kept at path, which must exist.
func ReadKeyFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := decodeKey(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return key, nil
}

func createKeyFile(path string) ([]byte, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	// Written in full under a temporary name (CreateTemp makes it 0600),
	// then linked into place, which fails if another process was first.
	f, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	_, werr := f.WriteString(hex.EncodeToString(key) + "\n")
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return nil, err
	}
	err = os.Link(f.Name(), path)
	if errors.Is(err, fs.ErrExist) {
		// Another process created it first; use theirs.
		return KeyFile(path)
	}
	if err != nil {
		return nil, err
	}
	return key, nil
}

func decodeKey(s string) ([]byte, error) {
	if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	return nil, errors.New("must be 32 bytes, as 64 hex characters or base64")
}

// Key derives the 32-byte key for one purpose. Each purpose gets an
// independent key, so one leaking tells nothing about the others.
func (s *Secrets) Key(purpose string) []byte {
	k, err := hkdf.Key(sha256.New, s.master, nil, "giving/"+purpose, 32)
	if err != nil {
		panic("secrets: hkdf: " + err.Error())
	}
	return k
}

// Sealer encrypts small records with AES-256-GCM.
type Sealer struct {
	aead cipher.AEAD
}

// Sealer returns the AES-GCM sealer for one purpose.
func (s *Secrets) Sealer(purpose string) *Sealer { return NewSealer(s.Key(purpose)) }

// NewSealer returns the AES-GCM sealer of a 32-byte key, for a key kept
// apart from the master key (the vault's phone keys).
func NewSealer(key []byte) *Sealer {
	block, err := aes.NewCipher(key)
	if err != nil {
		panic("secrets: aes: " + err.Error())
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic("secrets: gcm: " + err.Error())
	}
	return &Sealer{aead: aead}
}

// Seal encrypts plaintext bound to aad (which must be given again to open).
func (s *Sealer) Seal(plaintext, aad []byte) []byte {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plaintext)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("secrets: crypto/rand: " + err.Error())
	}
	return s.aead.Seal(nonce, nonce, plaintext, aad)
}

// ErrUnsealable means sealed data was corrupted, or sealed with another key
// or for other associated data.
var ErrUnsealable = errors.New("sealed data cannot be opened")

// Open decrypts what Seal produced.
func (s *Sealer) Open(sealed, aad []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n+s.aead.Overhead() {
		return nil, ErrUnsealable
	}
	out, err := s.aead.Open(nil, sealed[:n], sealed[n:], aad)
	if err != nil {
		return nil, ErrUnsealable
	}
	return out, nil
}
