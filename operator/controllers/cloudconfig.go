package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/profiles"
)

// CloudConfigSync copies spec.cloudConfig's object, which must be in the config
// namespace, into the Secret profiles.CloudConfigSecret in the CCM's namespace: the
// named key transformed by the profile and renamed profiles.CloudConfigKey, and the
// cloud's CA (ca-bundle.pem) if the source has one. Nothing else of the source is
// copied: the Secret is mounted into a pod whose image the CloudControllerManager's
// editor chooses, so it carries only what the CCM needs. spec.volumes.cloudConfig, the
// CSI driver's own credentials, is copied the same way into render.CSICloudConfigSecret
// (key render.CSICloudConfigKey). It sets CloudConfigSynced for both.
type CloudConfigSync struct {
	cfg       Config
	reader    client.Reader
	transient *transientWindow
}

// NewCloudConfigSync returns the cloud config sync's reconciler; reader reads the
// source uncached (the operator does not watch Secrets outside the CCM's namespace).
func NewCloudConfigSync(cfg Config, reader client.Reader) *CloudConfigSync {
	return &CloudConfigSync{cfg: cfg, reader: reader, transient: newTransientWindow(cfg.DegradedAfter, cfg.Now)}
}

// syncResult is a sync controller's finding.
type syncResult struct {
	status          metav1.ConditionStatus
	reason, message string
	err             error
}

// Reconcile implements reconcile.Reconciler.
func (s *CloudConfigSync) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var ccm v1alpha1.CloudControllerManager
	if err := s.cfg.Client.Get(ctx, singleton, &ccm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !ccm.DeletionTimestamp.IsZero() || ccm.Spec.ManagementState != v1alpha1.Managed {
		return reconcile.Result{}, nil // the operand controller removes, or nothing changes
	}
	res := s.sync(ctx, &ccm)
	res = settle(s.transient, res)
	cond := newCondition(ccm.Status.Conditions, ccm.Generation, v1alpha1.ConditionCloudConfigSynced, res.status, res.reason, res.message)
	if err := applyStatus(ctx, s.cfg.Client, FieldManagerCloudConfig, syncStatus{Conditions: []metav1.Condition{cond}}); err != nil {
		return reconcile.Result{}, err
	}
	if res.err != nil {
		return reconcile.Result{}, res.err
	}
	return reconcile.Result{RequeueAfter: resync(s.cfg)}, nil
}

func resync(cfg Config) time.Duration {
	if cfg.SourceResync > 0 {
		return cfg.SourceResync
	}
	return time.Minute
}

// settle applies the transient window to a sync result: a transient error is reported
// as still synced (with the error in the message) until it has lasted long enough.
func settle(w *transientWindow, res syncResult) syncResult {
	if res.err == nil {
		if res.status == metav1.ConditionTrue {
			w.ok()
		}
		return res
	}
	degraded, at := w.fail()
	if degraded {
		res.status, res.reason = metav1.ConditionFalse, ReasonSyncFailed
		res.message = fmt.Sprintf("failing for over %s: %v", w.after, res.err)
	} else {
		res.status, res.reason = metav1.ConditionTrue, ReasonSynced
		res.message = fmt.Sprintf("last sync failed, not synced if it lasts until %s: %v", at.UTC().Format(time.RFC3339), res.err)
	}
	return res
}

func (s *CloudConfigSync) sync(ctx context.Context, ccm *v1alpha1.CloudControllerManager) syncResult {
	res := s.syncOne(ctx, ccm, "spec.cloudConfig", ccm.Spec.CloudConfig, profiles.CloudConfigSecret, profiles.CloudConfigKey)
	if ccm.Spec.CloudConfig == nil && res.err == nil {
		res.message = "spec.cloudConfig is not set: the CCM runs without --cloud-config"
	}
	if ccm.Spec.Volumes == nil {
		csi := s.syncOne(ctx, ccm, "spec.volumes", nil, render.CSICloudConfigSecret, render.CSICloudConfigKey)
		if csi.err != nil {
			return joinResults(res, csi)
		}
		return res
	}
	csi := s.syncOne(ctx, ccm, "spec.volumes.cloudConfig", &ccm.Spec.Volumes.CloudConfig, render.CSICloudConfigSecret, render.CSICloudConfigKey)
	return joinResults(res, csi)
}

// joinResults is the one condition of two syncs: False with the reason of the first
// that is False (an error of the other is in the message, and retried at the next
// resync), else the errors of both (retried with backoff), else True; both messages.
func joinResults(a, b syncResult) syncResult {
	text := func(r syncResult) string {
		if r.err != nil {
			return "failed: " + r.err.Error()
		}
		return r.message
	}
	msg := text(a) + "; " + text(b)
	for _, r := range []syncResult{a, b} {
		if r.err == nil && r.status == metav1.ConditionFalse {
			return syncResult{status: metav1.ConditionFalse, reason: r.reason, message: msg}
		}
	}
	if err := errors.Join(a.err, b.err); err != nil {
		return syncResult{err: err, message: msg}
	}
	reason := ReasonSynced
	if a.reason == ReasonNoSource && b.reason == ReasonNoSource {
		reason = ReasonNoSource
	}
	return syncResult{status: metav1.ConditionTrue, reason: reason, message: msg}
}

// syncOne copies src (the spec's field) into the Secret target of the CCM's namespace
// under key, or deletes target when src is nil.
func (s *CloudConfigSync) syncOne(ctx context.Context, ccm *v1alpha1.CloudControllerManager, fieldPath string, src *v1alpha1.ConfigSource, target, targetKey string) syncResult {
	if src == nil {
		if err := deleteSynced(ctx, s.cfg.Client, ccm, &corev1.Secret{}, s.cfg.Namespace, target); err != nil {
			return syncResult{err: err}
		}
		return syncResult{status: metav1.ConditionTrue, reason: ReasonNoSource, message: fieldPath + " is not set"}
	}
	if err := s.cfg.checkSource(fieldPath, *src); err != nil {
		return syncResult{status: metav1.ConditionFalse, reason: ReasonSourceNotAllowed, message: err.Error()}
	}
	p, err := profiles.Load(ccm.Spec.Platform)
	if err != nil {
		return syncResult{status: metav1.ConditionFalse, reason: ReasonUnknownPlatform, message: err.Error()}
	}
	data, err := readSource(ctx, s.reader, *src, defaultCloudConfig)
	if err != nil {
		return sourceError(fieldPath, *src, err)
	}
	key := keyOr(src.Key, defaultCloudConfig)
	out := map[string][]byte{}
	if ca, ok := data[cloudConfigCAKey]; ok && key != cloudConfigCAKey {
		out[cloudConfigCAKey] = ca
	}
	if out[targetKey], err = p.TransformCloudConfig(data[key]); err != nil {
		return syncResult{status: metav1.ConditionFalse, reason: ReasonSourceInvalid,
			message: fmt.Sprintf("%s: %s %s/%s key %s: %v; fix the file", fieldPath, src.Kind, src.Namespace, src.Name, key, err)}
	}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: target, Namespace: s.cfg.Namespace},
		Type:       corev1.SecretTypeOpaque,
		Data:       out,
	}
	if err := applySynced(ctx, s.cfg.Client, ccm, secret, FieldManagerCloudConfig); err != nil {
		return syncResult{err: err}
	}
	return syncResult{status: metav1.ConditionTrue, reason: ReasonSynced,
		message: fmt.Sprintf("%s %s/%s is copied to Secret %s/%s", src.Kind, src.Namespace, src.Name, s.cfg.Namespace, target)}
}

// checkSource refuses a source outside the config namespace before anything is read:
// the operator may read Secrets there only, and an editor of the CloudControllerManager
// must not be able to make it copy another namespace's Secret next to an image the
// editor chose.
func (c Config) checkSource(field string, src v1alpha1.ConfigSource) error {
	if src.Namespace == c.ConfigNamespace {
		return nil
	}
	return fmt.Errorf("%s.namespace %q: the operator reads sources only from namespace %q (its --config-namespace); "+
		"move %s %s there and set %s.namespace to %q", field, src.Namespace, c.ConfigNamespace, src.Kind, src.Name, field, c.ConfigNamespace)
}

// errSourceKey says the source object lacks the key.
var errSourceKey = errors.New("has no such key")

// readSource reads every key of a ConfigMap or Secret and checks the wanted one is there.
func readSource(ctx context.Context, r client.Reader, src v1alpha1.ConfigSource, defaultKey string) (map[string][]byte, error) {
	key := client.ObjectKey{Namespace: src.Namespace, Name: src.Name}
	data := map[string][]byte{}
	switch src.Kind {
	case v1alpha1.SourceSecret:
		var sec corev1.Secret
		if err := r.Get(ctx, key, &sec); err != nil {
			return nil, err
		}
		maps.Copy(data, sec.Data)
	default:
		var cm corev1.ConfigMap
		if err := r.Get(ctx, key, &cm); err != nil {
			return nil, err
		}
		for k, v := range cm.Data {
			data[k] = []byte(v)
		}
		maps.Copy(data, cm.BinaryData)
	}
	if _, ok := data[keyOr(src.Key, defaultKey)]; !ok {
		return nil, errSourceKey
	}
	return data, nil
}

// sourceError turns a failure to read a source into a result naming it and the fix.
func sourceError(field string, src v1alpha1.ConfigSource, err error) syncResult {
	name := fmt.Sprintf("%s %s/%s", src.Kind, src.Namespace, src.Name)
	switch {
	case apierrors.IsNotFound(err):
		return syncResult{status: metav1.ConditionFalse, reason: ReasonSourceNotFound,
			message: fmt.Sprintf("%s named by %s does not exist: create it, or fix %s", name, field, field)}
	case errors.Is(err, errSourceKey):
		return syncResult{status: metav1.ConditionFalse, reason: ReasonSourceInvalid,
			message: fmt.Sprintf("%s has no key %q: add it, or set %s.key", name, src.Key, field)}
	}
	return syncResult{err: fmt.Errorf("read %s: %w", name, err)}
}

func keyOr(k, def string) string {
	if k == "" {
		return def
	}
	return k
}

// applySynced server-side applies a sync controller's output, owned by ccm.
func applySynced(ctx context.Context, c client.Client, ccm *v1alpha1.CloudControllerManager, obj client.Object, fieldManager string) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("encode %s: %w", obj.GetName(), err)
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	ownedBy(u, ccm, ComponentSync)
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// deleteSynced deletes a sync controller's output, read through c (whose cache holds
// only objects labelled as the operator's): already gone is fine, and an object of that
// name that ccm does not control is left alone. A user who installed the CSI driver by
// hand created its cloud config Secret under the name the sync writes; the operator
// must not delete it because spec.volumes is unset.
func deleteSynced(ctx context.Context, c client.Client, ccm *v1alpha1.CloudControllerManager, obj client.Object, namespace, name string) error {
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("get %s/%s to delete it: %w", namespace, name, err)
	case !metav1.IsControlledBy(obj, ccm):
		return nil
	}
	uid := obj.GetUID()
	if err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s/%s: %w", namespace, name, err)
	}
	return nil
}
