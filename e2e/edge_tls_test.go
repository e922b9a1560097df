package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/partnergiving/giving/httpapi/apitest"
)

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and a pool trusting the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "giving test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	return certFile, keyFile, roots
}

// The service serves https with --tls-cert/--tls-key, and the sandbox
// simulators reach its edge over that https.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, roots := selfSigned(t)
	srv := launchServe(t, nil, "--data", t.TempDir(), "--addr", "127.0.0.1:0", "--nats-listen", "", "--demo",
		"--tls-cert", certFile, "--tls-key", keyFile)
	out := srv.Stdout
	urlForm := regexp.MustCompile(`listening on (https://127\.0\.0\.1:[0-9]+)`)
	keyForm := regexp.MustCompile(`API key: +(sk_test_[0-9A-Za-z]+)`)
	waitFor(t, 30*time.Second, "serve prints its https url and demo key", func() bool {
		return urlForm.MatchString(out.String()) && keyForm.MatchString(out.String())
	})
	base := urlForm.FindStringSubmatch(out.String())[1]
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	c := &apitest.Client{TB: t, Base: base, Key: keyForm.FindStringSubmatch(out.String())[1], HTTP: hc}

	church := importChurch(t, c, "Grace")
	resp := c.Do(http.MethodPost, "/sandbox/simulate/deposit", `{"church_id":"`+church+`","account_ref":"acct","amount":12.34}`, nil)
	if resp.Status != http.StatusOK || resp.Map(t)["status_code"].(float64) != 200 {
		t.Fatalf("deposit over https: %d %s", resp.Status, resp.Body)
	}
	// Plain http to the https port is refused by the TLS server.
	if r, err := http.Get("http://" + base[len("https://"):] + "/healthz"); err == nil {
		r.Body.Close()
		if r.StatusCode == http.StatusOK {
			t.Fatal("plain http served on the https port")
		}
	}
	if code := srv.terminate(t); code != 0 {
		t.Fatalf("serve exited %d; stderr: %s", code, srv.Stderr)
	}
}
