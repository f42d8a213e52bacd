package images

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// NonRootUser is the uid:gid of the unprivileged user the base's /etc/passwd names
// (nonroot, as in distroless images); in-cluster images run as it.
const NonRootUser = "65532:65532"

// CACertificatesPath is where the base puts the CA bundle: the first file Go's
// crypto/x509 (and OpenSSL on Debian) reads on Linux.
const CACertificatesPath = "/etc/ssl/certs/ca-certificates.crt"

// BaseFiles returns the minimal base every in-cluster image gets beside its binary:
// the CA certificates a provider needs to reach its cloud's API over TLS, and
// /etc/passwd and /etc/group naming root and the nonroot user, so that a process
// running as NonRootUser has a name. Nothing else: no shell, no package manager.
//
// The certificates come from the Go module golang.org/x/crypto/x509roots/fallback (the
// Mozilla root store Go's own fallback uses), pinned by go.sum, and not from the build
// machine's /etc/ssl: so the same commit gives the same bytes, and the same image
// digest, on any machine. Roots the store trusts only with a constraint (for example a
// distrust date) are left out, because a PEM file cannot carry the constraint.
func BaseFiles() ([]File, error) {
	ca, err := caBundle()
	if err != nil {
		return nil, err
	}
	return []File{
		{Path: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n"), Mode: 0o644},
		{Path: "/etc/group", Data: []byte("root:x:0:\nnonroot:x:65532:\n"), Mode: 0o644},
		{Path: CACertificatesPath, Data: ca, Mode: 0o644},
	}, nil
}

// CABundle is the CA bundle the base puts at CACertificatesPath: what an image of
// nephele's trusts when nothing else is given.
func CABundle() ([]byte, error) { return caBundle() }

// caBundle PEM-encodes the unconstrained roots of the fallback bundle, in its order.
func caBundle() ([]byte, error) {
	var out []byte
	n := 0
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		if _, err := x509.ParseCertificate(root.Certificate); err != nil {
			return nil, fmt.Errorf("CA bundle: root %d: %w", n, err)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate})...)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("CA bundle: no roots in golang.org/x/crypto/x509roots/fallback")
	}
	return out, nil
}
