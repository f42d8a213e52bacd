package serving

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DefaultAlwaysAllowPaths returns upstream's default for
// --authorization-always-allow-paths. The health endpoints need no authentication here
// whatever the flag says; the default is kept so that the flag reads as upstream's.
func DefaultAlwaysAllowPaths() []string { return []string{"/healthz", "/readyz", "/livez"} }

// How long review results are trusted by default (Config's cache TTLs, upstream's
// flags, change them), and how many are kept. Upstream's delegated authentication and
// authorization keep every answer for 10s; a denial or a rejected token is kept for only
// 1s here so that a newly granted permission or a fresh token works almost at once,
// while a scraper hammering with a bad token still costs at most one review per second.
// A rejected token is never kept longer than tokenInvalidTTL.
const (
	// DefaultTokenCacheTTL is how long a token's user is kept.
	DefaultTokenCacheTTL = 10 * time.Second
	// DefaultAllowedCacheTTL is how long an allowed request's answer is kept.
	DefaultAllowedCacheTTL = 10 * time.Second
	// DefaultDeniedCacheTTL is how long a denied request's answer is kept.
	DefaultDeniedCacheTTL = time.Second

	tokenInvalidTTL = time.Second
	authCacheSize   = 1024
	// reviewTimeout bounds one TokenReview or SubjectAccessReview call, as upstream's
	// --authentication-token-webhook-timeout default does.
	reviewTimeout = 10 * time.Second
)

// tokenResult is a cached TokenReview answer.
type tokenResult struct {
	user          authenticationv1.UserInfo
	authenticated bool
}

// decision is a cached SubjectAccessReview answer.
type decision struct {
	allowed bool
	reason  string
}

// delegatedAuth lets a request through when the kube-apiserver authenticates its bearer
// token (TokenReview) and authorizes the user for the request's non-resource path and
// verb (SubjectAccessReview), as upstream components' delegated auth does.
type delegatedAuth struct {
	client      kubernetes.Interface
	certs       *certAuth // nil: bearer tokens only
	alwaysAllow []string
	now         func() time.Time
	logger      logr.Logger

	tokenTTL, allowedTTL, deniedTTL time.Duration

	tokens    *ttlCache[tokenResult]
	decisions *ttlCache[decision]
}

// cacheTTLs are how long the answers of the reviews are kept: a token's user, an allowed
// request, a denied one. A zero field takes the default.
type cacheTTLs struct{ token, allowed, denied time.Duration }

func newDelegatedAuth(client kubernetes.Interface, certs *certAuth, alwaysAllow []string, ttls cacheTTLs, now func() time.Time, logger logr.Logger) *delegatedAuth {
	return &delegatedAuth{
		client:      client,
		certs:       certs,
		alwaysAllow: alwaysAllow,
		now:         now,
		logger:      logger,
		tokenTTL:    cmp.Or(ttls.token, DefaultTokenCacheTTL),
		allowedTTL:  cmp.Or(ttls.allowed, DefaultAllowedCacheTTL),
		deniedTTL:   cmp.Or(ttls.denied, DefaultDeniedCacheTTL),
		tokens:      newTTLCache[tokenResult](authCacheSize),
		decisions:   newTTLCache[decision](authCacheSize),
	}
}

// validateAlwaysAllowPaths checks upstream's syntax: absolute paths, optionally ending
// in "*" to match a prefix.
func validateAlwaysAllowPaths(paths []string) error {
	var errs []error
	for _, p := range paths {
		switch {
		case !strings.HasPrefix(p, "/"):
			errs = append(errs, fmt.Errorf("path %q must start with \"/\"", p))
		case strings.Contains(strings.TrimSuffix(p, "*"), "*"):
			errs = append(errs, fmt.Errorf("path %q may contain \"*\" only at its end", p))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("--authorization-always-allow-paths: %w", errors.Join(errs...))
	}
	return nil
}

// open reports whether path needs no authentication: the health endpoints and their
// single checks always, and the always-allowed paths.
func (a *delegatedAuth) open(path string) bool {
	for _, ep := range []string{endpointHealthz, endpointLivez, endpointReadyz} {
		if path == "/"+ep || strings.HasPrefix(path, "/"+ep+"/") {
			return true
		}
	}
	for _, p := range a.alwaysAllow {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(path, prefix) {
				return true
			}
		} else if path == p {
			return true
		}
	}
	return false
}

// wrap returns next behind authentication and authorization.
func (a *delegatedAuth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.open(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), reviewTimeout)
		defer cancel()
		user, ok, err := a.authenticateRequest(ctx, r)
		if err != nil {
			// As upstream: a failed review is a failed authentication. The log says why.
			a.logger.Error(err, "Unable to authenticate the request", "path", r.URL.Path)
			unauthorized(w)
			return
		}
		if !ok {
			unauthorized(w)
			return
		}
		verb := strings.ToLower(r.Method)
		d, err := a.authorize(ctx, user, r.URL.Path, verb)
		if err != nil {
			a.logger.Error(err, "Unable to authorize the request", "user", user.Username, "path", r.URL.Path, "verb", verb)
			http.Error(w, "Internal Server Error: authorization failed", http.StatusInternalServerError)
			return
		}
		if !d.allowed {
			msg := fmt.Sprintf("Forbidden: user %q cannot %s path %q", user.Username, verb, r.URL.Path)
			if d.reason != "" {
				msg += ": " + d.reason
			}
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		// The token has done its job; nothing behind this filter needs it.
		r.Header.Del("Authorization")
		next.ServeHTTP(w, r)
	})
}

// authenticateRequest asks upstream's authenticators in upstream's order: a front
// proxy's or a client's certificate, then the bearer token. The first that knows the
// user wins; errors count only when none does.
func (a *delegatedAuth) authenticateRequest(ctx context.Context, r *http.Request) (authenticationv1.UserInfo, bool, error) {
	var certErr error
	if a.certs != nil {
		user, ok, err := a.certs.authenticate(r)
		if ok {
			return user, true, nil
		}
		certErr = err
	}
	token, ok := bearerToken(r)
	if !ok {
		return authenticationv1.UserInfo{}, false, certErr
	}
	user, ok, err := a.authenticate(ctx, token)
	if ok {
		return user, true, nil
	}
	return authenticationv1.UserInfo{}, false, errors.Join(certErr, err)
}

// bearerToken returns the token of an "Authorization: Bearer <token>" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="kubernetes"`)
	http.Error(w, "Unauthorized", http.StatusUnauthorized)
}

// authenticate returns the user the token belongs to, from the cache or a TokenReview.
func (a *delegatedAuth) authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, bool, error) {
	sum := sha256.Sum256([]byte(token)) // never keep the token itself
	key := string(sum[:])
	if res, ok := a.tokens.get(key, a.now()); ok {
		return res.user, res.authenticated, nil
	}
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	got, err := a.client.AuthenticationV1().TokenReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, false, fmt.Errorf("creating TokenReview: %w", err)
	}
	res := tokenResult{user: got.Status.User, authenticated: got.Status.Authenticated}
	ttl := a.tokenTTL
	if !res.authenticated {
		ttl = min(a.tokenTTL, tokenInvalidTTL)
		if got.Status.Error != "" {
			a.logger.V(2).Info("Token rejected", "reason", got.Status.Error)
		}
	}
	a.tokens.add(key, res, ttl, a.now())
	return res.user, res.authenticated, nil
}

// authorize decides whether user may use verb on the non-resource path, from the cache
// or a SubjectAccessReview.
func (a *delegatedAuth) authorize(ctx context.Context, user authenticationv1.UserInfo, path, verb string) (decision, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	spec := authorizationv1.SubjectAccessReviewSpec{
		User:                  user.Username,
		UID:                   user.UID,
		Groups:                user.Groups,
		Extra:                 extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}
	// The spec is the question; its JSON (maps sorted by key) identifies it exactly.
	raw, err := json.Marshal(spec)
	if err != nil {
		return decision{}, fmt.Errorf("encoding SubjectAccessReview for user %q: %w", user.Username, err)
	}
	sum := sha256.Sum256(raw)
	key := string(sum[:])
	if d, ok := a.decisions.get(key, a.now()); ok {
		return d, nil
	}
	got, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("creating SubjectAccessReview for user %q, %s %s: %w", user.Username, verb, path, err)
	}
	d := decision{allowed: got.Status.Allowed && !got.Status.Denied, reason: got.Status.Reason}
	if got.Status.EvaluationError != "" {
		a.logger.V(2).Info("SubjectAccessReview evaluation error", "user", user.Username, "path", path, "verb", verb, "error", got.Status.EvaluationError)
	}
	ttl := a.allowedTTL
	if !d.allowed {
		ttl = a.deniedTTL
	}
	a.decisions.add(key, d, ttl, a.now())
	return d, nil
}
