package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nephele-dev/nephele/manager/serving"
)

// The ConfigMap in which the kube-apiserver publishes how it authenticates clients, and
// its keys, as upstream's delegated authentication reads them.
const (
	authConfigMapNamespace = "kube-system"
	authConfigMapName      = "extension-apiserver-authentication"
	// authLookupTimeout bounds the one read at start.
	authLookupTimeout = 30 * time.Second
)

// lookupAuthentication fills in what the flags leave out from the cluster's
// extension-apiserver-authentication ConfigMap, as upstream's
// --authentication-skip-lookup=false: the client CA when --client-ca-file is empty, and
// the whole request-header configuration when --requestheader-client-ca-file is. It is
// read once at start (upstream watches it; a rotated front-proxy CA needs a restart
// here). A missing ConfigMap leaves cfg as it is; one that cannot be read is an error,
// unless tolerate (--authentication-tolerate-lookup-failure), which logs why and how to
// fix it and goes on with the flags alone.
func lookupAuthentication(ctx context.Context, client kubernetes.Interface, cfg *serving.Config, tolerate bool, log logr.Logger) error {
	if cfg.ClientCAFile != "" && cfg.RequestHeader.ClientCAFile != "" {
		return nil // nothing to fill in
	}
	ctx, cancel := context.WithTimeout(ctx, authLookupTimeout)
	defer cancel()
	cm, err := client.CoreV1().ConfigMaps(authConfigMapNamespace).Get(ctx, authConfigMapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		err = fmt.Errorf("reading %s/%s to complete --client-ca-file and --requestheader-* (--authentication-skip-lookup=false): %w; "+
			"grant the manager's identity the %s/extension-apiserver-authentication-reader Role with a RoleBinding, or pass --authentication-skip-lookup",
			authConfigMapNamespace, authConfigMapName, err, authConfigMapNamespace)
		if tolerate {
			log.Error(err, "Going on with the authentication flags alone (--authentication-tolerate-lookup-failure)")
			return nil
		}
		return err
	}
	if cfg.ClientCAFile == "" {
		cfg.ClientCA = []byte(cm.Data["client-ca-file"])
	}
	if cfg.RequestHeader.ClientCAFile == "" && cm.Data["requestheader-client-ca-file"] != "" {
		rh := serving.RequestHeaderConfig{ClientCA: []byte(cm.Data["requestheader-client-ca-file"])}
		for key, into := range map[string]*[]string{
			"requestheader-allowed-names":        &rh.AllowedNames,
			"requestheader-username-headers":     &rh.UsernameHeaders,
			"requestheader-uid-headers":          &rh.UIDHeaders,
			"requestheader-group-headers":        &rh.GroupHeaders,
			"requestheader-extra-headers-prefix": &rh.ExtraHeaderPrefixes,
		} {
			if v := cm.Data[key]; v != "" {
				if err := json.Unmarshal([]byte(v), into); err != nil {
					return fmt.Errorf("%s/%s: key %s: want a JSON list of strings: %w", authConfigMapNamespace, authConfigMapName, key, err)
				}
			}
		}
		cfg.RequestHeader = rh
	}
	return nil
}
