package install

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/google/go-containerregistry/pkg/name"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/ptr"

	"github.com/nephele-dev/nephele/deploy/render"
	"github.com/nephele-dev/nephele/images"
)

// Names and ports of the operator's objects.
const (
	// Name is the operator's Deployment, ServiceAccount, ClusterRole and Lease.
	Name = "nephele-operator"
	// DefaultNamespace is the operator's own namespace.
	DefaultNamespace = "nephele-operator"
	// DefaultConfigNamespace is where the CloudControllerManager's cloud config and CA
	// sources live: the one namespace whose Secrets and ConfigMaps the operator may read
	// (as openshift-config is for OpenShift's cluster operators).
	DefaultConfigNamespace = "nephele-config"
	// SecurePort serves /metrics over HTTPS, authenticated and authorized by the API
	// server, and /healthz and /readyz. On the host network (the operator runs before a
	// CNI), so a port of its own next to the CCM's 10258.
	SecurePort = 10270
	// operandRulesRole holds the rules the operator grants the CCM.
	operandRulesRole = Name + ":operand-rules"
)

// DefaultImage is the operator image `make images` builds.
var DefaultImage = images.Operator.Ref(images.DefaultVersion)

// Options are the settings of the operator's manifests.
type Options struct {
	// Namespace is the operator's namespace.
	Namespace string
	// OperandNamespace is the CCM's namespace (the operator's --operand-namespace).
	OperandNamespace string
	// ConfigNamespace holds spec.cloudConfig's and spec.trustedCA's sources (the
	// operator's --config-namespace); the operator may read Secrets there and nowhere
	// else outside the CCM's namespace.
	ConfigNamespace string
	// Image is the operator's image.
	Image string
	// Version is the CCM version the operator runs by default (its --version).
	Version string
	// Replicas of the operator; one leads.
	Replicas int
}

// DefaultOptions are the options of operator/install/operator.yaml.
func DefaultOptions() Options {
	return Options{Namespace: DefaultNamespace, OperandNamespace: render.DefaultNamespace, ConfigNamespace: DefaultConfigNamespace, Image: DefaultImage,
		Version: images.DefaultVersion, Replicas: 1}
}

// Validate returns one line per bad option.
func (o Options) Validate() error {
	var errs []error
	for flag, ns := range map[string]string{"namespace": o.Namespace, "operand-namespace": o.OperandNamespace, "config-namespace": o.ConfigNamespace} {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("invalid value for --%s: %q: %v", flag, ns, msgs))
		}
	}
	if err := ValidateConfigNamespace(o.ConfigNamespace, o.OperandNamespace); err != nil {
		errs = append(errs, err)
	}
	if _, err := name.ParseReference(o.Image, name.StrictValidation); err != nil {
		errs = append(errs, fmt.Errorf("invalid value for --image: %q: %v", o.Image, err))
	}
	if o.Replicas < 1 {
		errs = append(errs, fmt.Errorf("invalid value for --replicas: %d: must be at least 1", o.Replicas))
	}
	return errors.Join(errs...)
}

// ValidateConfigNamespace refuses a config namespace that holds Secrets other than the
// CloudControllerManager's sources: an editor of the CloudControllerManager may name any
// Secret there for the operator to copy next to an image the editor chooses, so it must
// not be kube-system (bootstrap and service account tokens) or the CCM's namespace.
func ValidateConfigNamespace(config, operand string) error {
	for _, ns := range []string{controllerNamespace, operand} {
		if config == ns {
			return fmt.Errorf("invalid value for --config-namespace: %q: it holds other Secrets, which an editor of the CloudControllerManager could have the operator copy; give the sources a namespace of their own (default %s)", config, DefaultConfigNamespace)
		}
	}
	return nil
}

func labels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": Name, "app.kubernetes.io/part-of": "nephele"}
}

func meta(n, ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: n, Namespace: ns, Labels: labels()}
}

// Render returns the operator's objects in apply order: the CRD, its namespace,
// identity and RBAC, then its Deployment.
func Render(o Options) ([]*unstructured.Unstructured, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	crd, err := CRD()
	if err != nil {
		return nil, err
	}
	operandCluster, operandNS, err := operandRules(o.OperandNamespace)
	if err != nil {
		return nil, err
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: Name, Namespace: o.Namespace}}
	tm := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: kind}
	}
	clusterRole := func(n string, rules []rbacv1.PolicyRule) []any {
		return []any{
			&rbacv1.ClusterRole{TypeMeta: tm("ClusterRole"), ObjectMeta: meta(n, ""), Rules: rules},
			&rbacv1.ClusterRoleBinding{TypeMeta: tm("ClusterRoleBinding"), ObjectMeta: meta(n, ""),
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: n}, Subjects: subject},
		}
	}
	role := func(n, ns string, rules []rbacv1.PolicyRule) []any {
		return []any{
			&rbacv1.Role{TypeMeta: tm("Role"), ObjectMeta: meta(n, ns), Rules: rules},
			&rbacv1.RoleBinding{TypeMeta: tm("RoleBinding"), ObjectMeta: meta(n, ns),
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: n}, Subjects: subject},
		}
	}
	ns := meta(o.Namespace, "")
	// The operator runs on the host network, which Pod Security's baseline forbids.
	ns.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
	typed := []any{
		&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: ns},
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(Name, o.Namespace)},
	}
	clusterNames, err := operandClusterNames(o.OperandNamespace, "ClusterRole", "ClusterRoleBinding")
	if err != nil {
		return nil, err
	}
	driverNames, err := operandClusterNames(o.OperandNamespace, "CSIDriver")
	if err != nil {
		return nil, err
	}
	classNames, err := operandClusterNames(o.OperandNamespace, "StorageClass")
	if err != nil {
		return nil, err
	}
	typed = append(typed, clusterRole(Name, policyRules(clusterRules(clusterNames, driverNames, classNames)))...)
	typed = append(typed, clusterRole(operandRulesRole, operandCluster)...)
	typed = append(typed, role(Name, o.OperandNamespace, append(policyRules(namespacedRules()), operandNS[o.OperandNamespace]...))...)
	if o.OperandNamespace != controllerNamespace {
		typed = append(typed, role(Name, controllerNamespace, append(policyRules(controllerNamespaceRules()), operandNS[controllerNamespace]...))...)
	}
	if o.ConfigNamespace != o.Namespace && o.ConfigNamespace != o.OperandNamespace && o.ConfigNamespace != controllerNamespace {
		typed = append(typed, &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: meta(o.ConfigNamespace, "")})
	}
	typed = append(typed, role(Name+":config-sources", o.ConfigNamespace, policyRules(configRules()))...)
	typed = append(typed, role(Name+":leader-election", o.Namespace, policyRules(leaderRules()))...)
	typed = append(typed, o.deployment())

	objs := []*unstructured.Unstructured{crd}
	for _, t := range typed {
		u, err := toUnstructured(t)
		if err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// Args are the operator's flags in its Deployment.
func (o Options) args() []string {
	return []string{
		"run",
		"--namespace=" + o.Namespace,
		"--operand-namespace=" + o.OperandNamespace,
		"--config-namespace=" + o.ConfigNamespace,
		"--version=" + o.Version,
		"--leader-elect=true",
		"--secure-port=" + strconv.Itoa(SecurePort),
	}
}

func (o Options) deployment() *appsv1.Deployment {
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path,
			Port: intstr.FromInt32(SecurePort), Scheme: corev1.URISchemeHTTPS}},
			PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3}
	}
	noSchedule := func(key string) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	}
	sel := map[string]string{"app.kubernetes.io/name": Name}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta(Name, o.Namespace),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(o.Replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels()},
				Spec: corev1.PodSpec{
					ServiceAccountName: Name,
					// Before a CNI exists the operator must still run to start the CCM that
					// initializes the Nodes the CNI waits for.
					HostNetwork:       true,
					DNSPolicy:         corev1.DNSDefault,
					PriorityClassName: "system-cluster-critical",
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)),
						RunAsGroup: ptr.To(int64(65532)), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Tolerations: []corev1.Toleration{
						noSchedule(cloudproviderapi.TaintExternalCloudProvider),
						noSchedule(corev1.TaintNodeNotReady),
						noSchedule(corev1.TaintNodeNetworkUnavailable),
						noSchedule("node-role.kubernetes.io/control-plane"),
					},
					Containers: []corev1.Container{{
						Name: Name, Image: o.Image, ImagePullPolicy: corev1.PullIfNotPresent, Args: o.args(),
						Ports:         []corev1.ContainerPort{{Name: "https", ContainerPort: SecurePort, Protocol: corev1.ProtocolTCP}},
						LivenessProbe: probe("/healthz"), ReadinessProbe: probe("/readyz"),
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
						},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
				},
			},
		},
	}
}

// header opens the YAML: what made it and how to make it again.
const header = "# Rendered by `nephele-operator manifests`; regenerate with make manifests, do not edit (docs/operator.md).\n"

// YAML writes objs as one multi-document stream.
func YAML(objs []*unstructured.Unstructured) ([]byte, error) { return render.Stream(header, objs) }

// toUnstructured is render.ToUnstructured without the empty strategy a Deployment that
// sets none serializes as.
func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	u, err := render.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	if s, found, _ := unstructured.NestedMap(u.Object, "spec", "strategy"); found && len(s) == 0 {
		unstructured.RemoveNestedField(u.Object, "spec", "strategy")
	}
	return u, nil
}
