package eventlog

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

// masterKeyFile is where the embedded default keeps a generated master key.
const masterKeyFile = "master.key"

// LoadSecrets takes the master key from configured (64 hex characters or
// base64 of 32 bytes) or, when that is empty, from the data directory,
// generating it there with mode 0600 on first use.
func LoadSecrets(configured, dataDir string) (*Secrets, error) {
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
	path := filepath.Join(dataDir, masterKeyFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createMasterKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}
	key, err := decodeKey(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("master key %s: %w", path, err)
	}
	return &Secrets{master: key}, nil
}

func createMasterKey(path string) (*Secrets, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Another process created it first; use theirs.
		return LoadSecrets("", filepath.Dir(path))
	}
	if err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}
	_, werr := f.WriteString(hex.EncodeToString(key) + "\n")
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}
	return &Secrets{master: key}, nil
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
		panic("eventlog: hkdf: " + err.Error())
	}
	return k
}

// Sealer encrypts small records with AES-256-GCM.
type Sealer struct {
	aead cipher.AEAD
}

// Sealer returns the AES-GCM sealer for one purpose.
func (s *Secrets) Sealer(purpose string) *Sealer {
	block, err := aes.NewCipher(s.Key(purpose))
	if err != nil {
		panic("eventlog: aes: " + err.Error())
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic("eventlog: gcm: " + err.Error())
	}
	return &Sealer{aead: aead}
}

// Seal encrypts plaintext bound to aad (which must be given again to open).
func (s *Sealer) Seal(plaintext, aad []byte) []byte {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plaintext)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("eventlog: crypto/rand: " + err.Error())
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
