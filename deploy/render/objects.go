package render

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/ptr"
)

// Well-known names the Deployment uses; from k8s.io/api where it has them.
const (
	// SecurePort is the manager's --secure-port: health, readiness and metrics.
	SecurePort = 10258
	// containerName is the manager's container.
	containerName = "cloud-controller-manager"
	// cloudConfigDir is where the cloud config Secret or ConfigMap is mounted.
	cloudConfigDir = "/etc/nephele/cloud-config"
	// cloudConfigVolume names its volume.
	cloudConfigVolume = "cloud-config"
	// priorityClass is the built-in class of components a cluster cannot run without.
	priorityClass = "system-cluster-critical"
	// nonRootID is the uid and gid of the image's nonroot user (images.NonRootUser).
	nonRootID = 65532

	// taintClusterAPIUninitialized is Cluster API's bootstrap taint (cluster-api#8357).
	taintClusterAPIUninitialized = "node.cluster.x-k8s.io/uninitialized"
	// labelControlPlane is the control-plane node role, label and taint key.
	labelControlPlane = "node-role.kubernetes.io/control-plane"
	// tolerationCriticalAddonsOnly is the taint some distributions put on nodes kept
	// for critical add-ons.
	tolerationCriticalAddonsOnly = "CriticalAddonsOnly"
)

// Labels every object carries; SelectorLabels select the manager's pods.
var (
	SelectorLabels = map[string]string{"app.kubernetes.io/name": "nephele-ccm"}
	commonLabels   = map[string]string{
		"app.kubernetes.io/name":      "nephele-ccm",
		"app.kubernetes.io/component": "cloud-controller-manager",
		"app.kubernetes.io/part-of":   "nephele",
	}
)

func labels() map[string]string { return maps.Clone(commonLabels) }

func meta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels()}
}

// rbacObjects are the ServiceAccounts, then the Roles, ClusterRoles and their bindings.
// Every identity's ServiceAccount comes first, the manager's and, under
// --use-service-account-credentials, each controller's: `kubectl apply` creates them
// before the bindings that name them, `kubectl delete -f` removes them, and the manager
// never has to create one (so its identity holds no create on serviceaccounts).
func (r resolved) rbacObjects() []any {
	ids := r.identities()
	var objs []any
	for _, id := range ids {
		objs = append(objs, &corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: meta(id.ServiceAccount, id.Namespace),
		})
	}
	var roles, bindings []any
	for _, id := range ids {
		subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: id.ServiceAccount, Namespace: id.Namespace}}
		if id.ClusterRole != "" && len(id.Cluster) > 0 {
			objs = append(objs, &rbacv1.ClusterRole{
				TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
				ObjectMeta: meta(id.ClusterRole, ""),
				Rules:      policyRules(id.Cluster),
			}, &rbacv1.ClusterRoleBinding{
				TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
				ObjectMeta: meta(id.ClusterRole, ""),
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: id.ClusterRole},
				Subjects:   subject,
			})
		}
		if id.AuthDelegator {
			objs = append(objs, &rbacv1.ClusterRoleBinding{
				TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
				ObjectMeta: meta(AuthDelegatorBinding, ""),
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: authDelegatorClusterRole},
				Subjects:   subject,
			})
		}
		for _, nr := range id.Roles {
			roles = append(roles, &rbacv1.Role{
				TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
				ObjectMeta: meta(nr.Role, nr.Namespace),
				Rules:      policyRules(nr.Rules),
			})
			bindings = append(bindings, &rbacv1.RoleBinding{
				TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
				ObjectMeta: meta(nr.Role, nr.Namespace),
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: nr.Role},
				Subjects:   subject,
			})
		}
	}
	objs = append(objs, roles...)
	objs = append(objs, bindings...)
	if r.MetricsService {
		objs = append(objs, &rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: meta(MetricsReaderClusterRole, ""),
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		})
	}
	return objs
}

// policyRules turns rules into RBAC policy rules, one per group, resource and names.
func policyRules(rules []Rule) []rbacv1.PolicyRule {
	rules = mergeRules(rules)
	out := make([]rbacv1.PolicyRule, 0, len(rules))
	for _, r := range rules {
		out = append(out, rbacv1.PolicyRule{
			APIGroups:     []string{r.Group},
			Resources:     []string{r.Resource},
			ResourceNames: slices.Clone(r.ResourceNames),
			Verbs:         slices.Clone(r.Verbs),
		})
	}
	return out
}

// args are the manager's flags.
func (r resolved) args() []string {
	args := []string{
		"--cloud-provider=" + r.Provider,
	}
	if r.CloudConfig.Source != SourceNone {
		args = append(args, "--cloud-config="+cloudConfigDir+"/"+r.CloudConfig.Key)
	}
	args = append(args,
		"--cluster-name="+r.ClusterName,
	)
	if r.ClusterCIDR != "" {
		args = append(args, "--cluster-cidr="+r.ClusterCIDR)
	}
	args = append(args,
		fmt.Sprintf("--configure-cloud-routes=%t", r.ConfigureCloudRoutes),
		"--controllers="+strings.Join(r.Controllers, ","),
		fmt.Sprintf("--use-service-account-credentials=%t", r.UseServiceAccountCredentials),
		"--leader-elect=true",
		"--leader-elect-resource-namespace="+r.Namespace,
		fmt.Sprintf("--secure-port=%d", SecurePort),
		// The manifests bind no extension-apiserver-authentication-reader (docs/deploy.md):
		// scrapers authenticate with tokens, so the manager need not read the cluster's
		// client CA at start.
		"--authentication-skip-lookup=true",
	)
	return append(args, r.ExtraArgs...)
}

// deployment is the manager's Deployment.
func (r resolved) deployment() *appsv1.Deployment {
	probe := func(path string, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: path, Port: intstr.FromInt32(SecurePort), Scheme: corev1.URISchemeHTTPS,
			}},
			InitialDelaySeconds: 10, PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: failures,
		}
	}
	container := corev1.Container{
		Name:            containerName,
		Image:           r.Image,
		ImagePullPolicy: corev1.PullPolicy(r.ImagePullPolicy),
		Args:            r.args(),
		Ports:           []corev1.ContainerPort{{Name: "https", ContainerPort: SecurePort, Protocol: corev1.ProtocolTCP}},
		LivenessProbe:   probe("/healthz", 3),
		ReadinessProbe:  probe("/readyz", 3),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(r.Resources.CPURequest),
				corev1.ResourceMemory: resource.MustParse(r.Resources.MemoryRequest),
			},
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(r.Resources.MemoryLimit)},
		},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	var volumes []corev1.Volume
	if r.CloudConfig.Source != SourceNone {
		container.VolumeMounts = []corev1.VolumeMount{{Name: cloudConfigVolume, MountPath: cloudConfigDir, ReadOnly: true}}
		v := corev1.Volume{Name: cloudConfigVolume}
		if r.CloudConfig.Source == SourceSecret {
			v.Secret = &corev1.SecretVolumeSource{SecretName: r.CloudConfig.Name}
		} else {
			v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: r.CloudConfig.Name}}
		}
		volumes = append(volumes, v)
	}
	noSchedule := func(key string) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta(DeploymentName, r.Namespace),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(r.Replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: maps.Clone(SelectorLabels)},
			// Never a new pod before an old one is gone: with host networking the new
			// one would bind port 10258 beside the old one (kubernetes#120043), and the
			// anti-affinity below keeps it off a node that still runs one.
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       ptr.To(intstr.FromInt32(0)),
					MaxUnavailable: ptr.To(intstr.FromInt32(1)),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels()},
				Spec: corev1.PodSpec{
					ServiceAccountName: ServiceAccountName,
					// Before a CNI exists, only the node's own network works; and the
					// cluster's DNS is not up yet, so the node's resolver is used.
					HostNetwork:       true,
					DNSPolicy:         corev1.DNSDefault,
					PriorityClassName: priorityClass,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To(int64(nonRootID)),
						RunAsGroup:     ptr.To(int64(nonRootID)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Affinity: &corev1.Affinity{
						PodAntiAffinity: &corev1.PodAntiAffinity{
							RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
								LabelSelector: &metav1.LabelSelector{MatchLabels: maps.Clone(SelectorLabels)},
								TopologyKey:   corev1.LabelHostname,
							}},
						},
						NodeAffinity: &corev1.NodeAffinity{
							PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
								Weight: 100,
								Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
									Key: labelControlPlane, Operator: corev1.NodeSelectorOpExists,
								}}},
							}},
						},
					},
					Tolerations: []corev1.Toleration{
						noSchedule(cloudproviderapi.TaintExternalCloudProvider),
						noSchedule(taintClusterAPIUninitialized),
						noSchedule(corev1.TaintNodeNotReady),
						noSchedule(corev1.TaintNodeNetworkUnavailable),
						noSchedule(labelControlPlane),
						{Key: tolerationCriticalAddonsOnly, Operator: corev1.TolerationOpExists},
					},
					Containers: []corev1.Container{container},
					Volumes:    volumes,
				},
			},
		},
	}
}

// podDisruptionBudget lets a drain evict one manager at a time, and a crash-looping one
// always, so it can neither take every replica nor be blocked by a broken pod.
func (r resolved) podDisruptionBudget() *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: meta(DeploymentName, r.Namespace),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             ptr.To(intstr.FromInt32(1)),
			Selector:                   &metav1.LabelSelector{MatchLabels: maps.Clone(SelectorLabels)},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
}

// metricsService fronts port 10258 of every replica.
func (r resolved) metricsService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(DeploymentName, r.Namespace),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: maps.Clone(SelectorLabels),
			Ports: []corev1.ServicePort{{Name: "https", Port: SecurePort, TargetPort: intstr.FromString("https"),
				Protocol: corev1.ProtocolTCP}},
		},
	}
}

// serviceMonitor is the Prometheus Operator's scrape configuration for the metrics
// Service. The manager's certificate is self-signed, so the scrape skips verification;
// the bearer token is Prometheus's own, which needs MetricsReaderClusterRole.
func (r resolved) serviceMonitor() map[string]any {
	return map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "ServiceMonitor",
		"metadata":   map[string]any{"name": DeploymentName, "namespace": r.Namespace, "labels": stringMap(labels())},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": stringMap(SelectorLabels)},
			"endpoints": []any{map[string]any{
				"port":            "https",
				"scheme":          "https",
				"path":            "/metrics",
				"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
				"tlsConfig":       map[string]any{"insecureSkipVerify": true},
			}},
		},
	}
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
