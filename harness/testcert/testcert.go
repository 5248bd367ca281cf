// Package testcert makes the certificates of TLS tests: a CA, a server
// certificate for 127.0.0.1 and localhost that the CA signs, a client
// certificate for mutual TLS, and a CA no one trusts. The files are PEM,
// in one folder.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Set is the files of a test's certificates, under Dir.
type Set struct {
	Dir                   string
	CA, OtherCA           string // the CA's certificate; one that signed nothing here
	Cert, Key             string // the server's
	ClientCert, ClientKey string
	ca                    *x509.Certificate
	caKey                 *ecdsa.PrivateKey
	serial                int64
}

// New writes the certificates to dir.
func New(dir string) (*Set, error) {
	s := &Set{Dir: dir, serial: 1}
	for name, p := range map[string]*string{"ca.pem": &s.CA, "other-ca.pem": &s.OtherCA, "server.pem": &s.Cert,
		"server-key.pem": &s.Key, "client.pem": &s.ClientCert, "client-key.pem": &s.ClientKey} {
		*p = filepath.Join(dir, name)
	}
	var err error
	if s.ca, s.caKey, err = s.authority("strata test CA", s.CA); err != nil {
		return nil, err
	}
	if _, _, err = s.authority("a CA no one trusts", s.OtherCA); err != nil {
		return nil, err
	}
	if _, err := s.Renew(); err != nil {
		return nil, err
	}
	return s, s.issue(&x509.Certificate{Subject: pkix.Name{CommonName: "strata test client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, s.ClientCert, s.ClientKey)
}

// Renew writes a new server certificate and key (the key first, then the
// certificate, each in place, as a renewal might), and returns the new
// certificate's serial number.
func (s *Set) Renew() (*big.Int, error) {
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "127.0.0.1"}, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if err := s.issue(tmpl, s.Cert, s.Key); err != nil {
		return nil, err
	}
	return big.NewInt(s.serial), nil
}

func (s *Set) issue(tmpl *x509.Certificate, certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	s.serial++
	tmpl.SerialNumber = big.NewInt(s.serial)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.ca, &key.PublicKey, s.caKey)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
}

func (s *Set) authority(name, path string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	s.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(s.serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
}
