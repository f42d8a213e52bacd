package serving

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
)

// RequestHeaderConfig is upstream's front-proxy authentication (--requestheader-*): a
// client that presents a certificate signed by ClientCAFile, with one of AllowedNames as
// its common name when AllowedNames is set, says who the user is in request headers.
type RequestHeaderConfig struct {
	// ClientCAFile is --requestheader-client-ca-file, read again when it changes.
	ClientCAFile string
	// ClientCA is the CA bundle (PEM) when it comes from the cluster instead of a file
	// (extension-apiserver-authentication's requestheader-client-ca-file), used when
	// ClientCAFile is empty. Both empty turn request-header authentication off.
	ClientCA []byte
	// AllowedNames is --requestheader-allowed-names.
	AllowedNames []string
	// UsernameHeaders, UIDHeaders and GroupHeaders are --requestheader-username-headers,
	// --requestheader-uid-headers and --requestheader-group-headers: the first header
	// of UsernameHeaders (and of UIDHeaders) that has a value gives the user's name (and
	// UID); every value of every GroupHeaders header is a group.
	UsernameHeaders, UIDHeaders, GroupHeaders []string
	// ExtraHeaderPrefixes is --requestheader-extra-headers-prefix: a header named
	// prefix+key gives the user's extra value key (lower case, URL-unescaped).
	ExtraHeaderPrefixes []string
}

// certAuth authenticates by client certificate, as upstream's delegated authentication
// does before it looks at a bearer token: first a front proxy's certificate with the user
// in headers (request-header authentication), then a client certificate whose common name
// is the user and organizations the groups (--client-ca-file). The CA files are read
// again when they change.
type certAuth struct {
	clientCAs func() *x509.CertPool // nil: no client certificate authentication
	proxyCAs  func() *x509.CertPool // nil: no request-header authentication
	header    RequestHeaderConfig
}

// newCertAuth returns nil when no CA is configured: bearer tokens only.
func newCertAuth(clientCAFile string, clientCA []byte, rh RequestHeaderConfig, now func() time.Time, logger logr.Logger) (*certAuth, error) {
	a := &certAuth{header: rh}
	var err error
	if a.clientCAs, err = caSource("--client-ca-file", clientCAFile, clientCA, now, logger); err != nil {
		return nil, err
	}
	if a.proxyCAs, err = caSource("--requestheader-client-ca-file", rh.ClientCAFile, rh.ClientCA, now, logger); err != nil {
		return nil, err
	}
	if a.proxyCAs != nil && len(rh.UsernameHeaders) == 0 {
		return nil, errors.New("--requestheader-username-headers: empty with a request-header CA set: name the header the front proxy puts the user in (X-Remote-User)")
	}
	if a.clientCAs == nil && a.proxyCAs == nil {
		return nil, nil
	}
	return a, nil
}

// caSource returns the CA pool of file (read again when it changes) or, without a file,
// of the PEM bundle data; nil when there is neither.
func caSource(flag, file string, data []byte, now func() time.Time, logger logr.Logger) (func() *x509.CertPool, error) {
	switch {
	case file != "":
		r, err := newReloading(flag, []string{file}, parseCAs, now, logger)
		if err != nil {
			return nil, err
		}
		return r.get, nil
	case len(data) > 0:
		pool, err := parseCAs([][]byte{data})
		if err != nil {
			return nil, fmt.Errorf("%s from the cluster's extension-apiserver-authentication ConfigMap: %w", flag, err)
		}
		return func() *x509.CertPool { return pool }, nil
	}
	return nil, nil
}

// parseCAs parses a PEM bundle of CA certificates; a bundle without one is an error.
func parseCAs(contents [][]byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(contents[0]) {
		return nil, errors.New("no PEM certificate in the file")
	}
	return pool, nil
}

// errNoIdentity says a verified certificate did not say who the user is.
var errNoIdentity = errors.New("no user")

// authenticate returns the user r's client certificate (and, for a front proxy, its
// headers) authenticate, and false when r has no certificate either CA signed; an error
// says why a certificate one of them signed did not make a user.
func (a *certAuth) authenticate(r *http.Request) (authenticationv1.UserInfo, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return authenticationv1.UserInfo{}, false, nil
	}
	chain := r.TLS.PeerCertificates
	var proxyErr error
	if a.proxyCAs != nil && verifyClient(a.proxyCAs(), chain) == nil {
		user, err := a.fromHeaders(r, chain[0])
		if err == nil {
			return user, true, nil
		}
		// As upstream: a proxy certificate that names no user, or whose name is not
		// allowed, falls through to the other authenticators (one CA may sign both
		// proxies and clients); its error counts only if none of them knows the user.
		if !errors.Is(err, errNoIdentity) {
			proxyErr = err
		}
	}
	if a.clientCAs != nil && verifyClient(a.clientCAs(), chain) == nil {
		leaf := chain[0]
		if leaf.Subject.CommonName == "" {
			return authenticationv1.UserInfo{}, false, errors.Join(proxyErr, errors.New("client certificate verified by --client-ca-file has no common name, which is the user's name"))
		}
		return withAuthenticatedGroup(authenticationv1.UserInfo{
			Username: leaf.Subject.CommonName,
			Groups:   slices.Clone(leaf.Subject.Organization),
		}), true, nil
	}
	return authenticationv1.UserInfo{}, false, proxyErr
}

// fromHeaders reads the user a front proxy whose certificate is leaf names.
func (a *certAuth) fromHeaders(r *http.Request, leaf *x509.Certificate) (authenticationv1.UserInfo, error) {
	if len(a.header.AllowedNames) > 0 && !slices.Contains(a.header.AllowedNames, leaf.Subject.CommonName) {
		return authenticationv1.UserInfo{}, fmt.Errorf("front proxy certificate %q is not one of --requestheader-allowed-names", leaf.Subject.CommonName)
	}
	name := firstHeader(r.Header, a.header.UsernameHeaders)
	if name == "" {
		return authenticationv1.UserInfo{}, errNoIdentity
	}
	user := authenticationv1.UserInfo{Username: name, UID: firstHeader(r.Header, a.header.UIDHeaders)}
	for _, h := range a.header.GroupHeaders {
		user.Groups = append(user.Groups, r.Header.Values(h)...)
	}
	for key, values := range r.Header {
		extra, ok := a.extraKey(key)
		if !ok {
			continue
		}
		if user.Extra == nil {
			user.Extra = map[string]authenticationv1.ExtraValue{}
		}
		user.Extra[extra] = append(user.Extra[extra], values...)
	}
	a.stripHeaders(r)
	return withAuthenticatedGroup(user), nil
}

// stripHeaders removes the identity headers once they have been read, as upstream does,
// so that nothing behind the filter takes them for anything.
func (a *certAuth) stripHeaders(r *http.Request) {
	for _, h := range slices.Concat(a.header.UsernameHeaders, a.header.UIDHeaders, a.header.GroupHeaders) {
		r.Header.Del(h)
	}
	for key := range r.Header {
		if _, ok := a.extraKey(key); ok {
			r.Header.Del(key)
		}
	}
}

// extraKey returns the user's extra key a header names when it starts with one of the
// extra prefixes: the rest of its name, lower case and URL-unescaped.
func (a *certAuth) extraKey(header string) (string, bool) {
	for _, prefix := range a.header.ExtraHeaderPrefixes {
		if len(header) > len(prefix) && strings.EqualFold(header[:len(prefix)], prefix) {
			extra := strings.ToLower(header[len(prefix):])
			if unescaped, err := url.PathUnescape(extra); err == nil {
				extra = unescaped
			}
			return extra, true
		}
	}
	return "", false
}

func firstHeader(h http.Header, names []string) string {
	for _, n := range names {
		if v := strings.TrimSpace(h.Get(n)); v != "" {
			return v
		}
	}
	return ""
}

// withAuthenticatedGroup adds system:authenticated, as upstream's authenticator chain
// does for every authenticated user, so that RBAC rules granted to it apply.
func withAuthenticatedGroup(u authenticationv1.UserInfo) authenticationv1.UserInfo {
	if !slices.Contains(u.Groups, "system:authenticated") {
		u.Groups = append(u.Groups, "system:authenticated")
	}
	return u
}

// verifyClient verifies chain (leaf first, as TLS sent it) as a client certificate
// signed by roots.
func verifyClient(roots *x509.CertPool, chain []*x509.Certificate) error {
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return err
}
