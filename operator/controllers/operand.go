package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
	"github.com/nephele-dev/nephele/operator/profiles"
)

// Config is what the operator's controllers share.
type Config struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// Reader reads from the API server directly, for what no informer need cache (the
	// Nodes counted for a single-node cluster); Client when nil.
	Reader client.Reader
	// Namespace is the CCM's namespace.
	Namespace string
	// ConfigNamespace is the one namespace spec.cloudConfig, spec.trustedCA and
	// spec.volumes.cloudConfig may name
	// (the operator's --config-namespace), and the only one whose Secrets and ConfigMaps
	// the operator may read: a source named anywhere else is refused before anything is
	// read, copied or deleted.
	ConfigNamespace string
	// Version is the operator's version: the CCM's default version.
	Version string
	// DegradedAfter is how long transient errors last before Degraded; default
	// DefaultDegradedAfter.
	DegradedAfter time.Duration
	// ProgressingRequeue is how often an incomplete rollout is looked at again beside
	// the watches; default 30s.
	ProgressingRequeue time.Duration
	// SourceResync is how often the sync controllers read their sources in other
	// namespaces, which they read with GET and do not watch; default one minute.
	SourceResync time.Duration
	// SystemCABundle is the PEM bundle the operator trusts itself (its image's); the
	// trusted CA sync puts it first.
	SystemCABundle []byte
	// Now is the clock; default time.Now.
	Now func() time.Time
}

func (c Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c Config) namespaces() []string {
	if c.Namespace == render.ControllerServiceAccountNamespace {
		return []string{c.Namespace}
	}
	return []string{c.Namespace, render.ControllerServiceAccountNamespace}
}

// Operand reconciles the CCM's objects and reports Available, Progressing, Degraded and
// Upgradeable.
type Operand struct {
	cfg       Config
	transient *transientWindow
}

// NewOperand returns the operand controller's reconciler.
func NewOperand(cfg Config) *Operand {
	return &Operand{cfg: cfg, transient: newTransientWindow(cfg.DegradedAfter, cfg.Now)}
}

// operandStatus is the operand controller's share of the status.
type operandStatus struct {
	ObservedGeneration int64                      `json:"observedGeneration"`
	Conditions         []metav1.Condition         `json:"conditions"`
	Versions           []v1alpha1.OperandVersion  `json:"versions,omitempty"`
	Resources          []v1alpha1.ObjectReference `json:"resources,omitempty"`
}

// outcome is what one reconcile found, before it is written as conditions.
type outcome struct {
	available, progressing, degraded bool
	availReason, availMsg            string
	progReason, progMsg              string
	degReason, degMsg                string
	versions                         []v1alpha1.OperandVersion
	resources                        []v1alpha1.ObjectReference
	requeue                          time.Duration
	err                              error // returned to controller-runtime for backoff
}

// terminal is an error a retry cannot fix; it is Degraded at once. It keeps the error's
// chain: an invalid spec's *profiles.FieldError stays reachable with errors.As.
type terminal struct {
	reason string
	err    error
}

func (t *terminal) Error() string { return t.err.Error() }

func (t *terminal) Unwrap() error { return t.err }

// Reconcile implements reconcile.Reconciler.
func (o *Operand) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.NamespacedName != singleton {
		return reconcile.Result{}, nil
	}
	c := o.cfg.Client
	var ccm v1alpha1.CloudControllerManager
	if err := c.Get(ctx, req.NamespacedName, &ccm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !ccm.DeletionTimestamp.IsZero() {
		return o.finalize(ctx, &ccm)
	}
	if !controllerutil.ContainsFinalizer(&ccm, Finalizer) {
		patch := client.MergeFrom(ccm.DeepCopy())
		controllerutil.AddFinalizer(&ccm, Finalizer)
		if err := c.Patch(ctx, &ccm, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("add finalizer to CloudControllerManager %s: %w", ccm.Name, err)
		}
	}

	var out outcome
	switch ccm.Spec.ManagementState {
	case v1alpha1.Unmanaged:
		out = o.observe(ctx, &ccm)
		out.progressing, out.progReason, out.progMsg = false, ReasonUnmanaged, "managementState is Unmanaged: the operator changes nothing"
		out.degraded, out.degReason, out.degMsg = false, ReasonUnmanaged, "managementState is Unmanaged"
	case v1alpha1.Removed:
		out = o.remove(ctx, &ccm)
	default:
		out = o.manage(ctx, &ccm)
	}
	if err := o.writeStatus(ctx, &ccm, out); err != nil {
		return reconcile.Result{}, err
	}
	if out.err != nil {
		return reconcile.Result{}, out.err
	}
	return reconcile.Result{RequeueAfter: out.requeue}, nil
}

// manage renders and applies the CCM and observes its rollout.
func (o *Operand) manage(ctx context.Context, ccm *v1alpha1.CloudControllerManager) outcome {
	objs, rendering, err := o.render(ctx, ccm)
	if err != nil {
		return o.failed(err)
	}
	changed := false
	var errs []error
	for _, u := range objs {
		ch, err := applyObject(ctx, o.cfg.Client, u)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		changed = changed || ch
	}
	if len(errs) > 0 {
		return o.failed(errors.Join(errs...))
	}
	if err := o.prune(ctx, ccm, objs); err != nil {
		return o.failed(err)
	}
	o.transient.ok()
	out := o.observe(ctx, ccm)
	for _, u := range objs {
		out.resources = append(out.resources, ref(u))
	}
	if changed {
		out.progressing, out.progReason, out.progMsg = true, ReasonApplied, "applied changed objects of the CCM; waiting for their rollout"
	}
	if out.requeue == 0 {
		// A leader that stops renewing changes no object the controller watches.
		out.requeue = time.Minute
	}
	if out.progressing {
		out.requeue = o.progressingRequeue()
	} else if !out.degraded {
		out.versions = []v1alpha1.OperandVersion{{Name: render.DeploymentName, Version: rendering.Version, Image: rendering.Image}}
		if rendering.CSIImage != "" {
			out.versions = append(out.versions, v1alpha1.OperandVersion{Name: render.CSIControllerName, Version: rendering.CSIVersion, Image: rendering.CSIImage})
		}
	}
	return out
}

func (o *Operand) progressingRequeue() time.Duration {
	if o.cfg.ProgressingRequeue > 0 {
		return o.cfg.ProgressingRequeue
	}
	return 30 * time.Second
}

// render resolves the profile and renders every object, including the config hash; on
// an error nothing has been applied.
func (o *Operand) render(ctx context.Context, ccm *v1alpha1.CloudControllerManager) ([]*unstructured.Unstructured, profiles.Rendering, error) {
	p, err := profiles.Load(ccm.Spec.Platform)
	if err != nil {
		return nil, profiles.Rendering{}, &terminal{ReasonUnknownPlatform, fmt.Errorf("spec.platform: %w; fix spec.platform", err)}
	}
	var bad []error
	sources := map[string]*v1alpha1.ConfigSource{"spec.cloudConfig": ccm.Spec.CloudConfig, "spec.trustedCA": ccm.Spec.TrustedCA}
	if ccm.Spec.Volumes != nil {
		sources["spec.volumes.cloudConfig"] = &ccm.Spec.Volumes.CloudConfig
	}
	for field, src := range sources {
		if src != nil {
			if err := o.cfg.checkSource(field, *src); err != nil {
				bad = append(bad, err)
			}
		}
	}
	if len(bad) > 0 {
		slices.SortFunc(bad, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, profiles.Rendering{}, &terminal{ReasonInvalidSpec, errors.Join(bad...)}
	}
	if ccm.Spec.CloudConfig != nil || ccm.Spec.Volumes != nil {
		if c := findCondition(ccm.Status.Conditions, v1alpha1.ConditionCloudConfigSynced); c != nil && c.Status == metav1.ConditionFalse &&
			(c.Reason == ReasonSourceNotFound || c.Reason == ReasonSourceInvalid) {
			return nil, profiles.Rendering{}, &terminal{ReasonCloudConfigFailed, fmt.Errorf("the cloud config is not synced: %s", c.Message)}
		}
	}
	// Two Nodes' metadata, read from the API server: through the cache this would
	// start an informer holding every Node of the cluster, for one count.
	var nodes metav1.PartialObjectMetadataList
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	reader := o.cfg.Reader
	if reader == nil {
		reader = o.cfg.Client
	}
	if err := reader.List(ctx, &nodes, client.Limit(2)); err != nil {
		return nil, profiles.Rendering{}, fmt.Errorf("list Nodes to tell a single-node cluster: %w", err)
	}
	in := profiles.Input{Spec: ccm.Spec, Namespace: o.cfg.Namespace, DefaultVersion: o.cfg.Version, SingleNode: len(nodes.Items) == 1}
	r, err := profiles.Render(p, in)
	if err != nil {
		return nil, profiles.Rendering{}, &terminal{ReasonInvalidSpec, err}
	}
	for _, u := range r.Objects {
		if !isOperandKind(u.GroupVersionKind()) {
			return nil, profiles.Rendering{}, &terminal{ReasonInvalidSpec,
				fmt.Errorf("platform %s renders %s, a kind the operator does not manage", p.Name, refString(ref(u)))}
		}
	}
	// Each workload's pods roll when what they mount changes: the CCM's with the CCM's
	// config, the CSI driver's with its own.
	ccmObjs := slices.DeleteFunc(slices.Clone(r.Objects), func(u *unstructured.Unstructured) bool { return slices.Contains(r.CSI, u) })
	if in.ConfigHash, err = configHash(ctx, o.cfg.Client, o.cfg.Namespace, podConfigRefs(ccmObjs)); err != nil {
		return nil, profiles.Rendering{}, err
	}
	if in.CSIConfigHash, err = configHash(ctx, o.cfg.Client, o.cfg.Namespace, podConfigRefs(r.CSI)); err != nil {
		return nil, profiles.Rendering{}, err
	}
	if r, err = profiles.Render(p, in); err != nil {
		return nil, profiles.Rendering{}, &terminal{ReasonInvalidSpec, err}
	}
	for _, u := range r.Objects {
		ownedBy(u, ccm, ComponentOperand)
	}
	return r.Objects, r, nil
}

// prune deletes the operand objects the rendering no longer has.
func (o *Operand) prune(ctx context.Context, ccm *v1alpha1.CloudControllerManager, objs []*unstructured.Unstructured) error {
	want := map[v1alpha1.ObjectReference]bool{}
	for _, u := range objs {
		want[ref(u)] = true
	}
	live, err := listOwned(ctx, o.cfg.Client, ComponentOperand, o.cfg.namespaces(), ccm)
	if err != nil {
		return err
	}
	stale := slices.DeleteFunc(live, func(u *unstructured.Unstructured) bool { return want[ref(u)] })
	_, err = deleteAll(ctx, o.cfg.Client, stale)
	return err
}

// remove deletes every object the operator made; Nodes and cloud resources are never
// among them.
func (o *Operand) remove(ctx context.Context, ccm *v1alpha1.CloudControllerManager) outcome {
	var live []*unstructured.Unstructured
	for _, comp := range []string{ComponentOperand, ComponentSync} {
		l, err := listOwned(ctx, o.cfg.Client, comp, o.cfg.namespaces(), ccm)
		if err != nil {
			return o.failed(err)
		}
		live = append(live, l...)
	}
	left, err := deleteAll(ctx, o.cfg.Client, live)
	if err != nil {
		return o.failed(err)
	}
	o.transient.ok()
	out := outcome{availReason: ReasonRemoved, availMsg: "managementState is Removed: the CCM is de-provisioned",
		degReason: ReasonRemoved, degMsg: "managementState is Removed", progReason: ReasonRemoved, progMsg: "the CCM is removed"}
	if left > 0 {
		out.progressing, out.progMsg = true, fmt.Sprintf("deleting %d objects of the CCM", left)
		out.requeue = time.Second
	}
	return out
}

// finalize de-provisions a deleted CloudControllerManager, then lets it go.
func (o *Operand) finalize(ctx context.Context, ccm *v1alpha1.CloudControllerManager) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(ccm, Finalizer) {
		return reconcile.Result{}, nil
	}
	out := o.remove(ctx, ccm)
	if out.err != nil {
		return reconcile.Result{}, out.err
	}
	if out.progressing {
		return reconcile.Result{RequeueAfter: out.requeue}, nil
	}
	patch := client.MergeFrom(ccm.DeepCopy())
	controllerutil.RemoveFinalizer(ccm, Finalizer)
	if err := o.cfg.Client.Patch(ctx, ccm, patch); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("remove finalizer from CloudControllerManager %s: %w", ccm.Name, err)
	}
	return reconcile.Result{}, nil
}

// failed turns an error into an outcome: terminal and missing-config errors are
// Degraded at once, others after the transient window.
func (o *Operand) failed(err error) outcome {
	out := outcome{availReason: ReasonNotAvailable, availMsg: "the CCM is not rendered: see Degraded",
		progReason: ReasonAsExpected, progMsg: "nothing is rolling out"}
	var t *terminal
	var missing *MissingConfigError
	switch {
	case errors.As(err, &t):
		out.degraded, out.degReason, out.degMsg = true, t.reason, t.Error()
		o.transient.ok()
	case errors.As(err, &missing):
		// The sync controllers write these; the watch on them brings us back.
		out.progressing, out.progReason, out.progMsg = true, ReasonWaitingForConfig, missing.Error()
		out.requeue = o.progressingRequeue()
	default:
		degraded, at := o.transient.fail()
		if degraded {
			out.degraded, out.degReason, out.degMsg = true, ReasonApplyFailed,
				fmt.Sprintf("failing for over %s: %v", o.transient.after, err)
		} else {
			out.degReason, out.degMsg = ReasonAsExpected, fmt.Sprintf("a transient error, Degraded if it lasts until %s: %v", at.UTC().Format(time.RFC3339), err)
		}
		out.err = err
	}
	return out
}

// observe reads the Deployment, DaemonSets and Lease and says whether the CCM is
// available and whether a rollout is in progress.
func (o *Operand) observe(ctx context.Context, ccm *v1alpha1.CloudControllerManager) outcome {
	out := outcome{progReason: ReasonAsExpected, progMsg: "every rollout is complete", degReason: ReasonAsExpected, degMsg: "no errors"}
	key := client.ObjectKey{Namespace: o.cfg.Namespace, Name: render.DeploymentName}
	var d appsv1.Deployment
	if err := o.cfg.Client.Get(ctx, key, &d); err != nil {
		out.availReason, out.availMsg = ReasonNotAvailable, fmt.Sprintf("Deployment %s: %v", key, err)
		out.progressing, out.progReason, out.progMsg = true, ReasonRolloutInProgress, out.availMsg
		return out
	}
	if msg, done := deploymentRollout(&d); !done {
		out.progressing, out.progReason, out.progMsg = true, ReasonRolloutInProgress, msg
	}
	for _, cond := range d.Status.Conditions {
		if cond.Type == appsv1.DeploymentProgressing && cond.Reason == "ProgressDeadlineExceeded" {
			out.degraded, out.degReason = true, ReasonDeploymentFailed
			out.degMsg = fmt.Sprintf("Deployment %s made no progress: %s; look at its pods (kubectl -n %s describe pods -l app.kubernetes.io/name=nephele-ccm)",
				key, cond.Message, key.Namespace)
		}
	}
	var dss appsv1.DaemonSetList
	if err := o.cfg.Client.List(ctx, &dss, client.InNamespace(o.cfg.Namespace),
		client.MatchingLabels{profiles.LabelManagedBy: profiles.ManagedByValue}); err == nil {
		for _, ds := range dss.Items {
			if ds.Status.ObservedGeneration < ds.Generation || ds.Status.UpdatedNumberScheduled < ds.Status.CurrentNumberScheduled {
				out.progressing, out.progReason = true, ReasonRolloutInProgress
				out.progMsg = fmt.Sprintf("DaemonSet %s/%s: %d of %d pods updated", ds.Namespace, ds.Name,
					ds.Status.UpdatedNumberScheduled, ds.Status.CurrentNumberScheduled)
			}
		}
	}
	if d.Status.AvailableReplicas < 1 {
		out.availReason, out.availMsg = ReasonNotAvailable, fmt.Sprintf("Deployment %s has no available replica", key)
		return out
	}
	if ccm.Spec.Volumes != nil {
		if msg, ok := o.observeCSI(ctx, &out); !ok {
			out.availReason, out.availMsg = ReasonNotAvailable, msg
			return out
		}
	}
	var lease coordinationv1.Lease
	leaseKey := client.ObjectKey{Namespace: o.cfg.Namespace, Name: render.LeaseName}
	if err := o.cfg.Client.Get(ctx, leaseKey, &lease); err != nil || !leaseHeld(&lease, o.cfg.now()) {
		out.availReason, out.availMsg = ReasonNoLeader, fmt.Sprintf("Deployment %s is available but no replica holds Lease %s", key, leaseKey)
		if out.requeue == 0 {
			out.requeue = o.progressingRequeue()
		}
		return out
	}
	out.available, out.availReason = true, ReasonAsExpected
	out.availMsg = fmt.Sprintf("%d of %d replicas available; %s leads", d.Status.AvailableReplicas, ptrOr(d.Spec.Replicas, 1), *lease.Spec.HolderIdentity)
	return out
}

// observeCSI reads the CSI driver's controller Deployment: its rollout goes into out's
// Progressing; it returns why the driver is not available, or ok. The node plugin's
// DaemonSet is observed with the CCM's DaemonSets.
func (o *Operand) observeCSI(ctx context.Context, out *outcome) (string, bool) {
	key := client.ObjectKey{Namespace: o.cfg.Namespace, Name: render.CSIControllerName}
	var d appsv1.Deployment
	if err := o.cfg.Client.Get(ctx, key, &d); err != nil {
		msg := fmt.Sprintf("the CSI driver's Deployment %s: %v", key, err)
		out.progressing, out.progReason, out.progMsg = true, ReasonRolloutInProgress, msg
		return msg, false
	}
	if msg, done := deploymentRollout(&d); !done {
		out.progressing, out.progReason, out.progMsg = true, ReasonRolloutInProgress, msg
	}
	if d.Status.AvailableReplicas < 1 {
		return fmt.Sprintf("the CSI driver's Deployment %s has no available replica (kubectl -n %s describe pods -l app.kubernetes.io/name=nephele-csi)",
			key, key.Namespace), false
	}
	return "", true
}

// deploymentRollout says whether d's rollout is complete, and if not what is left.
func deploymentRollout(d *appsv1.Deployment) (string, bool) {
	want := ptrOr(d.Spec.Replicas, 1)
	s := d.Status
	switch {
	case s.ObservedGeneration < d.Generation:
		return fmt.Sprintf("Deployment %s/%s: generation %d not observed yet", d.Namespace, d.Name, d.Generation), false
	case s.UpdatedReplicas < want:
		return fmt.Sprintf("Deployment %s/%s: %d of %d replicas updated", d.Namespace, d.Name, s.UpdatedReplicas, want), false
	case s.Replicas > s.UpdatedReplicas:
		return fmt.Sprintf("Deployment %s/%s: %d old replicas left", d.Namespace, d.Name, s.Replicas-s.UpdatedReplicas), false
	case s.AvailableReplicas < want:
		return fmt.Sprintf("Deployment %s/%s: %d of %d replicas available", d.Namespace, d.Name, s.AvailableReplicas, want), false
	}
	return "", true
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// leaseHeld says whether a holder renewed the lease within its duration.
func leaseHeld(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil {
		return false
	}
	d := 15 * time.Second
	if l.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return now.Before(l.Spec.RenewTime.Add(d))
}

// writeStatus applies the operand controller's conditions and fields.
func (o *Operand) writeStatus(ctx context.Context, ccm *v1alpha1.CloudControllerManager, out outcome) error {
	gen := ccm.Generation
	cs := ccm.Status.Conditions
	b := func(v bool) metav1.ConditionStatus {
		if v {
			return metav1.ConditionTrue
		}
		return metav1.ConditionFalse
	}
	upgradeable, upReason, upMsg := true, ReasonAsExpected, "the version can be changed"
	switch {
	case ccm.Spec.ManagementState == v1alpha1.Unmanaged:
		upgradeable, upReason, upMsg = false, ReasonUnmanaged, "managementState is Unmanaged: the operator changes nothing"
	case out.degraded:
		upgradeable, upReason, upMsg = false, out.degReason, "Degraded: "+out.degMsg
	}
	st := operandStatus{
		ObservedGeneration: gen,
		Conditions: []metav1.Condition{
			newCondition(cs, gen, v1alpha1.ConditionAvailable, b(out.available), orReason(out.availReason), out.availMsg),
			newCondition(cs, gen, v1alpha1.ConditionProgressing, b(out.progressing), orReason(out.progReason), out.progMsg),
			newCondition(cs, gen, v1alpha1.ConditionDegraded, b(out.degraded), orReason(out.degReason), out.degMsg),
			newCondition(cs, gen, v1alpha1.ConditionUpgradeable, b(upgradeable), upReason, upMsg),
		},
		Versions:  out.versions,
		Resources: out.resources,
	}
	if st.Versions == nil && ccm.Spec.ManagementState != v1alpha1.Removed {
		st.Versions = ccm.Status.Versions // keep what last ran until a rollout completes
	}
	if st.Resources == nil && ccm.Spec.ManagementState != v1alpha1.Removed {
		st.Resources = ccm.Status.Resources
	}
	if err := applyStatus(ctx, o.cfg.Client, FieldManagerOperand, st); err != nil {
		return err
	}
	log.FromContext(ctx).V(1).Info("status", "available", out.available, "progressing", out.progressing,
		"degraded", out.degraded, "message", strings.Join([]string{out.availMsg, out.progMsg, out.degMsg}, "; "))
	return nil
}

func orReason(r string) string {
	if r == "" {
		return ReasonAsExpected
	}
	return r
}
