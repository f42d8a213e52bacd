package controlplane

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nephele-dev/nephele/internal/pki"
)

// Identity of the admin user in the token file. Group system:masters bypasses RBAC, as
// cluster-admin credentials do in a real cluster.
const (
	adminUser  = "nephele-admin"
	adminGroup = "system:masters"
)

// Identity kube-apiserver presents to kubelets (for logs, exec and port-forward): in
// system:masters, so the kubelets' webhook authorization allows it.
const (
	kubeletClientUser  = "kube-apiserver-kubelet-client"
	kubeletClientGroup = "system:masters"
)

const (
	serviceIssuer    = "https://kubernetes.default.svc"
	certValidity     = 24 * time.Hour
	serviceKeyBits   = 2048
	kubeconfigName   = "kubeconfig"
	kubeconfigTarget = "nephele"
)

// credentials are the files the control plane is started with, all in the env directory.
type credentials struct {
	token      string
	tokenFile  string // --token-auth-file
	saKey      string // RSA private key: apiserver signing key, KCM token signing
	saPub      string // its public key: apiserver verification
	caFile     string // CA that signed the serving certificate and the client certificates
	caPEM      []byte
	ca         *pki.Authority
	certFile   string // apiserver serving certificate and key
	keyFile    string
	kubeconfig string
	// kubeletClientCert and kubeletClientKey are the apiserver's client certificate
	// toward kubelets.
	kubeletClientCert, kubeletClientKey string
	// etcd are etcd's certificates, of a CA of their own (see writeEtcdCerts).
	etcd etcdCerts
	// frontProxy are the aggregator's request-header certificates (writeFrontProxyCerts).
	frontProxy frontProxyCerts
	dir        string
}

// etcdCerts are the files of etcd's TLS: its CA, the certificate it serves clients and
// peers with, and kube-apiserver's client certificate, the one identity etcd accepts.
type etcdCerts struct {
	caFile                string
	serverCert, serverKey string
	clientCert, clientKey string
	// tls is the client configuration with kube-apiserver's certificate, for probing
	// etcd's /health.
	tls *tls.Config
}

// frontProxyCerts are the files of the aggregation layer's authentication: a CA of its
// own and the client certificate kube-apiserver presents when it proxies a request to an
// aggregated API server (metrics-server, sample-apiserver), which then trusts the
// X-Remote-User and X-Remote-Group headers of that certificate only.
type frontProxyCerts struct {
	caFile                string
	clientCert, clientKey string
}

// frontProxyClientName is the common name of the aggregator's client certificate, the
// one name --requestheader-allowed-names lets set the X-Remote headers.
const frontProxyClientName = "front-proxy-client"

// writeCredentials creates a random admin token, service account keys, a CA, a serving
// certificate for 127.0.0.1, the kubernetes Service's address svcIP and servingIP (when
// valid), and the apiserver's client certificate toward kubelets, generated afresh for
// every env.
func writeCredentials(dir string, svcIP, servingIP netip.Addr) (*credentials, error) {
	c := &credentials{
		dir:        dir,
		tokenFile:  filepath.Join(dir, "tokens.csv"),
		saKey:      filepath.Join(dir, "sa.key"),
		saPub:      filepath.Join(dir, "sa.pub"),
		caFile:     filepath.Join(dir, "ca.crt"),
		certFile:   filepath.Join(dir, "apiserver.crt"),
		keyFile:    filepath.Join(dir, "apiserver.key"),
		kubeconfig: filepath.Join(dir, kubeconfigName),
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("generate admin token: %w", err)
	}
	c.token = hex.EncodeToString(raw)
	line := fmt.Sprintf("%s,%s,%s,%q\n", c.token, adminUser, adminUser, adminGroup)
	if err := os.WriteFile(c.tokenFile, []byte(line), 0o600); err != nil {
		return nil, fmt.Errorf("write token file: %w", err)
	}
	if err := writeServiceAccountKeys(c.saKey, c.saPub); err != nil {
		return nil, err
	}
	if err := c.writeServingCert(svcIP, servingIP); err != nil {
		return nil, err
	}
	var err error
	if c.kubeletClientCert, c.kubeletClientKey, err = c.issueClientCert("apiserver-kubelet-client", kubeletClientUser, kubeletClientGroup); err != nil {
		return nil, err
	}
	if err := c.writeEtcdCerts(); err != nil {
		return nil, err
	}
	if err := c.writeFrontProxyCerts(); err != nil {
		return nil, err
	}
	return c, nil
}

// writeFrontProxyCerts makes the aggregator's CA and client certificate in the
// front-proxy-pki subdirectory. The CA is not the cluster's: a client certificate the
// cluster's CA signed (a kubelet's, a user's) must not be able to assert any user to an
// aggregated API server through the request headers. The apiserver publishes the CA in
// kube-system/extension-apiserver-authentication for those servers to read.
func (c *credentials) writeFrontProxyCerts() error {
	ca, dir, err := c.authorityIn("front-proxy-pki", "nephele-front-proxy-ca")
	if err != nil {
		return fmt.Errorf("front proxy certificates: %w", err)
	}
	f := frontProxyCerts{
		caFile:     filepath.Join(dir, "ca.crt"),
		clientCert: filepath.Join(dir, frontProxyClientName+".crt"),
		clientKey:  filepath.Join(dir, frontProxyClientName+".key"),
	}
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: frontProxyClientName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if _, err := issue(ca, client, f.clientCert, f.clientKey); err != nil {
		return fmt.Errorf("front proxy certificates: %w", err)
	}
	c.frontProxy = f
	return nil
}

// writeEtcdCerts makes etcd's CA and certificates in the etcd subdirectory. etcd serves
// clients and peers on loopback with TLS and requires a client certificate of this CA,
// which signs nothing but etcd's own certificate and kube-apiserver's client
// certificate: the cluster's CA signs kubelets' and other clients' certificates, which
// must not open the store, and without client authentication any local user could read
// every Secret or write RBAC straight into etcd.
func (c *credentials) writeEtcdCerts() error {
	ca, dir, err := c.authorityIn("etcd-pki", "nephele-etcd-ca")
	if err != nil {
		return fmt.Errorf("etcd certificates: %w", err)
	}
	e := etcdCerts{
		caFile:     filepath.Join(dir, "ca.crt"),
		serverCert: filepath.Join(dir, "etcd.crt"), serverKey: filepath.Join(dir, "etcd.key"),
		clientCert: filepath.Join(dir, "apiserver-etcd-client.crt"), clientKey: filepath.Join(dir, "apiserver-etcd-client.key"),
	}
	// One certificate for clients and peers: etcd's peer connections are mutual TLS too.
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "etcd"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if _, err := issue(ca, server, e.serverCert, e.serverKey); err != nil {
		return fmt.Errorf("etcd certificates: %w", err)
	}
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-etcd-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	issued, err := issue(ca, client, e.clientCert, e.clientKey)
	if err != nil {
		return fmt.Errorf("etcd certificates: %w", err)
	}
	pair, err := issued.TLS()
	if err != nil {
		return fmt.Errorf("etcd certificates: %w", err)
	}
	e.tls = &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	c.etcd = e
	return nil
}

// authorityIn makes a CA of its own, named name, for the subdirectory sub of the env
// directory (created readable by the owner only), and writes its certificate to
// sub/ca.crt. It returns the CA and the subdirectory.
func (c *credentials) authorityIn(sub, name string) (*pki.Authority, string, error) {
	dir := filepath.Join(c.dir, sub)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	ca, err := pki.NewAuthority(name, certValidity)
	if err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.PEM(), 0o600); err != nil {
		return nil, "", err
	}
	return ca, dir, nil
}

// issue has ca sign tmpl, writes the certificate and its key, readable by the owner
// only, and returns them.
func issue(ca *pki.Authority, tmpl *x509.Certificate, certFile, keyFile string) (pki.Issued, error) {
	c, err := ca.Issue(tmpl)
	if err != nil {
		return pki.Issued{}, err
	}
	if err := os.WriteFile(certFile, c.CertPEM, 0o600); err != nil {
		return pki.Issued{}, fmt.Errorf("write %s: %w", certFile, err)
	}
	if err := os.WriteFile(keyFile, c.KeyPEM, 0o600); err != nil {
		return pki.Issued{}, fmt.Errorf("write %s: %w", keyFile, err)
	}
	return c, nil
}

func writeServiceAccountKeys(keyFile, pubFile string) error {
	key, err := rsa.GenerateKey(rand.Reader, serviceKeyBits)
	if err != nil {
		return fmt.Errorf("generate service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("encode service account public key: %w", err)
	}
	if err := writePEM(keyFile, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)); err != nil {
		return err
	}
	return writePEM(pubFile, "PUBLIC KEY", pub)
}

// writeServingCert creates a CA and a serving certificate signed by it, so clients verify
// the apiserver instead of skipping TLS verification. The CA also signs client
// certificates (issueClientCert), which the apiserver accepts (--client-ca-file).
func (c *credentials) writeServingCert(svcIP, servingIP netip.Addr) error {
	ca, err := pki.NewAuthority("nephele-ca", certValidity)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IP(svcIP.AsSlice())},
	}
	if servingIP.IsValid() && !servingIP.IsLoopback() {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(servingIP.AsSlice()))
	}
	c.ca, c.caPEM = ca, ca.PEM()
	if err := os.WriteFile(c.caFile, c.caPEM, 0o644); err != nil {
		return fmt.Errorf("write CA certificate: %w", err)
	}
	_, err = issue(ca, tmpl, c.certFile, c.keyFile)
	return err
}

// issueClientCert writes a client certificate for user in groups (CN and O), signed by
// the CA, and its key to name.crt and name.key in the pki subdirectory, and returns
// their paths.
func (c *credentials) issueClientCert(name, user string, groups ...string) (certFile, keyFile string, err error) {
	if c.ca == nil {
		return "", "", errNotStarted
	}
	dir := filepath.Join(c.dir, "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("client certificate %s: %w", name, err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if _, err := issue(c.ca, tmpl, certFile, keyFile); err != nil {
		return "", "", fmt.Errorf("client certificate %s: %w", name, err)
	}
	return certFile, keyFile, nil
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeKubeconfig writes the admin kubeconfig every component and test client uses.
func (c *credentials) writeKubeconfig(server string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[kubeconfigTarget] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: c.caPEM}
	cfg.AuthInfos[kubeconfigTarget] = &clientcmdapi.AuthInfo{Token: c.token}
	cfg.Contexts[kubeconfigTarget] = &clientcmdapi.Context{Cluster: kubeconfigTarget, AuthInfo: kubeconfigTarget}
	cfg.CurrentContext = kubeconfigTarget
	if err := clientcmd.WriteToFile(*cfg, c.kubeconfig); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}
