package control

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
)

// ServeOptions configure TLS on the control server. With TLSCert and TLSKey set
// the server speaks TLS 1.3 on every listener and may listen beyond loopback;
// with ClientCA set too, clients must present a certificate signed by it (mTLS).
type ServeOptions struct {
	TLSCert  string // PEM certificate chain
	TLSKey   string // PEM private key; mode 0600
	ClientCA string // PEM CA bundle for client certificates
}

func (o ServeOptions) tlsEnabled() bool { return o.TLSCert != "" || o.TLSKey != "" || o.ClientCA != "" }

// serverTLS builds the server's TLS config. The key pair is read again when
// either file changes, so certificates rotate without a restart.
func serverTLS(o ServeOptions, log *slog.Logger) (*tls.Config, error) {
	if o.TLSCert == "" || o.TLSKey == "" {
		return nil, errors.New("TLS needs both a certificate and a key")
	}
	kp := &keyPair{certFile: o.TLSCert, keyFile: o.TLSKey, log: log}
	if err := kp.reload(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: kp.get}
	if o.ClientCA != "" {
		pool, err := loadPool(o.ClientCA)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ClientTLS is the client side: caFile verifies the server (the system roots when
// empty); certFile and keyFile, when set, are the client's certificate for mTLS.
// Pass the result to Dial with grpc.WithTransportCredentials.
func ClientTLS(caFile, certFile, keyFile string) (credentials.TransportCredentials, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		if err := checkKeyMode(keyFile); err != nil {
			return nil, err
		}
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return credentials.NewTLS(cfg), nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA bundle %s: no PEM certificate", file)
	}
	return pool, nil
}

// checkKeyMode refuses a private key that others can read: secrets live in
// files of mode 0600.
func checkKeyMode(file string) error {
	fi, err := os.Stat(file)
	if err != nil {
		return fmt.Errorf("TLS key: %w", err)
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return fmt.Errorf("TLS key %s has mode %04o: make it 0600", file, m)
	}
	return nil
}

type keyPair struct {
	certFile, keyFile string
	log               *slog.Logger

	mu              sync.Mutex
	cert            *tls.Certificate
	certMod, keyMod time.Time
}

func modTime(file string) time.Time {
	fi, err := os.Stat(file)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

func (k *keyPair) reload() error {
	if err := checkKeyMode(k.keyFile); err != nil {
		return err
	}
	cm, km := modTime(k.certFile), modTime(k.keyFile)
	c, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return fmt.Errorf("TLS key pair: %w", err)
	}
	k.mu.Lock()
	k.cert, k.certMod, k.keyMod = &c, cm, km
	k.mu.Unlock()
	return nil
}

// get serves the current pair, reloading it first if a file changed. A failed
// reload keeps the old pair: a half-written file must not take the API down.
func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cm, km := modTime(k.certFile), modTime(k.keyFile)
	k.mu.Lock()
	changed := !cm.Equal(k.certMod) || !km.Equal(k.keyMod)
	k.mu.Unlock()
	if changed {
		if err := k.reload(); err != nil {
			k.log.Warn("control: keeping the old TLS certificate", "err", err)
			k.mu.Lock()
			k.certMod, k.keyMod = cm, km // do not retry on every handshake
			k.mu.Unlock()
		} else {
			k.log.Info("control: reloaded TLS certificate", "cert", k.certFile)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cert, nil
}
