package manager

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// serviceAccountNamespace holds the controllers' service accounts, as upstream.
const serviceAccountNamespace = "kube-system"

// tokenLifetime is how long a requested service-account token is valid; tokens are
// renewed well before they expire.
const tokenLifetime = time.Hour

// controllerClients builds the REST config each controller's client uses: the
// manager's own credentials with a user agent per controller, or, under
// --use-service-account-credentials, a token of the controller's own service account,
// so that RBAC and audit logs see each controller separately.
type controllerClients struct {
	root               *rest.Config
	rootClient         kubernetes.Interface
	component          string
	useServiceAccounts bool
}

// config returns the REST config for the controller named name whose service
// account is clientName.
func (c *controllerClients) config(ctx context.Context, name, clientName string) (*rest.Config, error) {
	userAgent := c.component + "/" + name
	if !c.useServiceAccounts {
		return rest.AddUserAgent(rest.CopyConfig(c.root), userAgent), nil
	}
	if clientName == "" {
		clientName = name
	}
	if err := c.ensureServiceAccount(ctx, clientName); err != nil {
		return nil, err
	}
	// Keep the server and its CA, drop the manager's own credentials.
	cfg := rest.AnonymousClientConfig(c.root)
	cfg.UserAgent = userAgent
	ts := transport.NewCachedTokenSource(&serviceAccountTokens{client: c.rootClient, name: clientName})
	cfg.WrapTransport = transport.ResettableTokenSourceWrapTransport(ts)
	return cfg, nil
}

func (c *controllerClients) ensureServiceAccount(ctx context.Context, name string) error {
	sas := c.rootClient.CoreV1().ServiceAccounts(serviceAccountNamespace)
	_, err := sas.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: serviceAccountNamespace}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("--use-service-account-credentials: service account %s/%s: %w", serviceAccountNamespace, name, err)
	}
	return nil
}

// serviceAccountTokens requests tokens for one service account with the TokenRequest
// API. Wrapped in client-go's caching token source, a new token is requested only when
// the cached one is about to expire or the apiserver refused it.
type serviceAccountTokens struct {
	client kubernetes.Interface
	name   string

	mu sync.Mutex
}

// Token implements oauth2.TokenSource.
func (s *serviceAccountTokens) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// oauth2.TokenSource has no context; bound the request instead.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seconds := int64(tokenLifetime / time.Second)
	tr, err := s.client.CoreV1().ServiceAccounts(serviceAccountNamespace).CreateToken(ctx, s.name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for service account %s/%s: %w", serviceAccountNamespace, s.name, err)
	}
	// Renew when 80% of the lifetime has passed, so a slow apiserver never leaves a
	// controller with an expired token.
	issued := time.Now()
	expiry := tr.Status.ExpirationTimestamp.Time
	renewAt := issued.Add(expiry.Sub(issued) * 8 / 10)
	return &oauth2.Token{AccessToken: tr.Status.Token, TokenType: "Bearer", Expiry: renewAt}, nil
}
