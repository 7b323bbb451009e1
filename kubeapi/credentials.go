package kubeapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
)

// AdminUser is the user the generated token authenticates: in system:masters, as kubeadm's
// admin.conf.
const AdminUser = "etcdmedic-admin"

// Credentials are what every apiserver of one cluster shares: a static token for the admin and
// the key that signs service-account tokens.
type Credentials struct {
	Token             string `json:"token"`
	TokenFile         string `json:"tokenFile"`         // --token-auth-file
	ServiceAccountKey string `json:"serviceAccountKey"` // --service-account-key-file and -signing-key-file
}

// NewCredentials writes a fresh token file and service-account key into dir (mode 0600).
func NewCredentials(dir string) (*Credentials, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	c := &Credentials{
		Token:             hex.EncodeToString(raw),
		TokenFile:         filepath.Join(dir, "tokens.csv"),
		ServiceAccountKey: filepath.Join(dir, "sa.key"),
	}
	line := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", c.Token, AdminUser, AdminUser)
	if err := os.WriteFile(c.TokenFile, []byte(line), 0o600); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.ServiceAccountKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	return c, nil
}
