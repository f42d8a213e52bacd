package controllers

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/profiles"
)

// TrustedCASync writes the ConfigMap profiles.TrustedCAConfigMap in the CCM's
// namespace: the operator's system bundle, then spec.trustedCA's certificates, then the
// synced cloud config's ca-bundle.pem. Every CCM container mounts it and points
// SSL_CERT_FILE at it, so the CCM trusts a private cloud endpoint before any other
// component (a CNI, a proxy operator) could have installed its CA. It sets
// TrustedCABundleSynced. A bad or missing source is left out of the bundle, and the
// condition says which and why; the rest is still written, so the CCM can run.
type TrustedCASync struct {
	cfg       Config
	reader    client.Reader
	transient *transientWindow
}

// NewTrustedCASync returns the trusted CA sync's reconciler; reader reads
// spec.trustedCA's object uncached.
func NewTrustedCASync(cfg Config, reader client.Reader) *TrustedCASync {
	return &TrustedCASync{cfg: cfg, reader: reader, transient: newTransientWindow(cfg.DegradedAfter, cfg.Now)}
}

// Reconcile implements reconcile.Reconciler.
func (s *TrustedCASync) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var ccm v1alpha1.CloudControllerManager
	if err := s.cfg.Client.Get(ctx, singleton, &ccm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !ccm.DeletionTimestamp.IsZero() || ccm.Spec.ManagementState != v1alpha1.Managed {
		return reconcile.Result{}, nil
	}
	res := settle(s.transient, s.sync(ctx, &ccm))
	cond := newCondition(ccm.Status.Conditions, ccm.Generation, v1alpha1.ConditionTrustedCABundleSynced, res.status, res.reason, res.message)
	if err := applyStatus(ctx, s.cfg.Client, FieldManagerTrustedCA, syncStatus{Conditions: []metav1.Condition{cond}}); err != nil {
		return reconcile.Result{}, err
	}
	if res.err != nil {
		return reconcile.Result{}, res.err
	}
	return reconcile.Result{RequeueAfter: resync(s.cfg)}, nil
}

func (s *TrustedCASync) sync(ctx context.Context, ccm *v1alpha1.CloudControllerManager) syncResult {
	var bundle bytes.Buffer
	var problems []string
	var sources []string
	add := func(what string, data []byte) {
		certs, err := pemCertificates(data)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v; fix it", what, err))
			return
		}
		for _, c := range certs {
			_ = pem.Encode(&bundle, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
		}
		sources = append(sources, fmt.Sprintf("%s (%d)", what, len(certs)))
	}
	if len(s.cfg.SystemCABundle) > 0 {
		add("the operator's system bundle", s.cfg.SystemCABundle)
	}
	reason := ReasonSynced
	if src := ccm.Spec.TrustedCA; src != nil {
		if err := s.cfg.checkSource("spec.trustedCA", *src); err != nil {
			// Nothing is written: the bundle the CCM mounts stays as it was.
			return syncResult{status: metav1.ConditionFalse, reason: ReasonSourceNotAllowed, message: err.Error()}
		}
		key := keyOr(src.Key, profiles.TrustedCAKey)
		data, err := readSource(ctx, s.reader, *src, profiles.TrustedCAKey)
		if err != nil {
			res := sourceError("spec.trustedCA", *src, err)
			if res.err != nil {
				return res
			}
			problems, reason = append(problems, res.message), res.reason
		} else {
			add(fmt.Sprintf("%s %s/%s key %s", src.Kind, src.Namespace, src.Name, key), data[key])
		}
	}
	if ccm.Spec.CloudConfig != nil {
		var synced corev1.Secret
		err := s.cfg.Client.Get(ctx, client.ObjectKey{Namespace: s.cfg.Namespace, Name: profiles.CloudConfigSecret}, &synced)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return syncResult{err: fmt.Errorf("read Secret %s/%s: %w", s.cfg.Namespace, profiles.CloudConfigSecret, err)}
		case len(synced.Data[cloudConfigCAKey]) > 0:
			add("the cloud config's "+cloudConfigCAKey, synced.Data[cloudConfigCAKey])
		}
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: profiles.TrustedCAConfigMap, Namespace: s.cfg.Namespace},
		Data:       map[string]string{profiles.TrustedCAKey: bundle.String()},
	}
	if err := applySynced(ctx, s.cfg.Client, ccm, cm, FieldManagerTrustedCA); err != nil {
		return syncResult{err: err}
	}
	if len(problems) > 0 {
		if reason == ReasonSynced {
			reason = ReasonSourceInvalid
		}
		return syncResult{status: metav1.ConditionFalse, reason: reason, message: strings.Join(problems, "; ")}
	}
	return syncResult{status: metav1.ConditionTrue, reason: ReasonSynced,
		message: fmt.Sprintf("ConfigMap %s/%s holds the certificates of %s", s.cfg.Namespace, profiles.TrustedCAConfigMap, strings.Join(sources, ", "))}
}

// pemCertificates parses every CERTIFICATE block of data; anything else is an error.
func pemCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := bytes.TrimSpace(data)
	for len(rest) > 0 {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, fmt.Errorf("not PEM after %d certificates", len(certs))
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("a PEM block of type %s, want CERTIFICATE", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
		rest = bytes.TrimSpace(rest)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("no certificate")
	}
	return certs, nil
}
