package render

import (
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// The CSI driver's well-known names.
const (
	// CSIDriverName is the driver's default name (package csi's DefaultName): the
	// CSIDriver object's and the StorageClass's provisioner.
	CSIDriverName = "csi.nephele.dev"
	// CSIControllerName names the controller's Deployment, ServiceAccount, ClusterRole
	// and leader election Role.
	CSIControllerName = "nephele-csi-controller"
	// CSINodeName names the node plugin's DaemonSet, ServiceAccount and ClusterRole.
	CSINodeName = "nephele-csi-node"
	// CSICloudConfigSecret is the Secret the controller reads the provider's cloud
	// config from: for the local cloud, a token of the CSI role (docs/volumes.md).
	CSICloudConfigSecret = "nephele-csi-cloud-config"
	// CSICloudConfigKey is the Secret's key holding the cloud config.
	CSICloudConfigKey = "cloud.yaml"
	// CSIStorageClass is the default StorageClass's name.
	CSIStorageClass = "nephele"

	// csiDefaultFSType is the driver's default file system (csi.DefaultFSType), which the
	// provisioner writes into each PersistentVolume that asks for none.
	csiDefaultFSType = "xfs"

	// defaultStorageClassAnnotation makes a StorageClass the cluster's default.
	defaultStorageClassAnnotation = "storageclass.kubernetes.io/is-default-class"
	// csiSocketDir is where the driver's socket is, in every container of a pod.
	csiSocketDir = "/csi"
	// kubeletDir is kubelet's root directory on the node.
	kubeletDir = "/var/lib/kubelet"
	// registrationDir is where the node plugin's registration socket goes, in the
	// container: kubelet's plugins_registry on the node.
	registrationDir = "/registration"
	// csiCloudConfigDir is where the controller's cloud config Secret is mounted.
	csiCloudConfigDir = "/etc/nephele/csi"
)

// CSIOptions configure the CSI driver's manifests.
type CSIOptions struct {
	// Namespace holds the controller, the node plugin and their identities.
	Namespace string
	// DriverName is the driver's name, a domain name of at most 63 characters.
	DriverName string
	// DriverImage is nephele's csi-driver image; ProvisionerImage, AttacherImage and
	// ResizerImage are the CSI sidecars'.
	DriverImage, ProvisionerImage, AttacherImage, ResizerImage string
	// ImagePullPolicy applies to every container.
	ImagePullPolicy corev1.PullPolicy
	// ControllerReplicas is the controller Deployment's replicas; the sidecars elect a
	// leader each.
	ControllerReplicas int32
	// MaxVolumesPerNode is how many volumes a node takes (the cloud's attach limit),
	// reported to the scheduler; 0 reports none.
	MaxVolumesPerNode int64
	// DeviceDirs are directories of the node, outside /dev, that the cloud's device
	// paths lead through (the local cloud's links in its hosts' directories): mounted
	// read-only into the node plugin at the same path. A cloud whose device paths are
	// under /dev (/dev/disk/by-id) needs none.
	DeviceDirs []string
	// ReservedDirs are directories an installer mounts into every container of the
	// driver beside the rendering's own mounts (nephele-operator's trusted CA bundle): a
	// device dir may not overlap them either. Not a flag.
	ReservedDirs []string
	// StorageClass, when true, adds the default StorageClass CSIStorageClass:
	// WaitForFirstConsumer, expansion allowed, volumes deleted with their claim.
	StorageClass bool
}

// DefaultCSIOptions are the options of `nephele manifests csi` without flags: the
// images nephele builds (images.CSIDriver and the sidecars at the versions hack/tools/csi
// pins), one controller replica, the local cloud's attach limit, and the default
// StorageClass.
func DefaultCSIOptions() CSIOptions {
	return CSIOptions{
		Namespace:          "kube-system",
		DriverName:         CSIDriverName,
		DriverImage:        "nephele.local/csi-driver:dev",
		ProvisionerImage:   "nephele.local/csi-provisioner:v6.4.0",
		AttacherImage:      "nephele.local/csi-attacher:v4.13.0",
		ResizerImage:       "nephele.local/csi-resizer:v2.3.0",
		ImagePullPolicy:    corev1.PullIfNotPresent,
		ControllerReplicas: 1,
		MaxVolumesPerNode:  16,
		StorageClass:       true,
	}
}

// AddFlags adds a flag for each option to fs, defaulting to o's values: the flags of
// `nephele manifests csi`.
func (o *CSIOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of the controller Deployment, the node DaemonSet, their ServiceAccounts and the cloud config Secret ("+CSICloudConfigSecret+")")
	fs.StringVar(&o.DriverName, "driver-name", o.DriverName, "the driver's name: the CSIDriver object's and the StorageClass's provisioner")
	fs.StringVar(&o.DriverImage, "driver-image", o.DriverImage, "nephele's csi-driver image")
	fs.StringVar(&o.ProvisionerImage, "provisioner-image", o.ProvisionerImage, "the external-provisioner image")
	fs.StringVar(&o.AttacherImage, "attacher-image", o.AttacherImage, "the external-attacher image")
	fs.StringVar(&o.ResizerImage, "resizer-image", o.ResizerImage, "the external-resizer image")
	fs.Var((*pullPolicy)(&o.ImagePullPolicy), "image-pull-policy", "Always, IfNotPresent or Never")
	fs.Int32Var(&o.ControllerReplicas, "controller-replicas", o.ControllerReplicas, "replicas of the controller Deployment; each sidecar elects a leader")
	fs.Int64Var(&o.MaxVolumesPerNode, "max-volumes-per-node", o.MaxVolumesPerNode, "volumes a node takes (the cloud's attach limit), told to the scheduler; 0 tells none")
	fs.StringArrayVar(&o.DeviceDirs, "device-dir", o.DeviceDirs, "a directory of the nodes, outside /dev, that the cloud's device paths lead through, mounted read-only into the node plugin; repeat for several (the local cloud's: its hosts' directory)")
	fs.BoolVar(&o.StorageClass, "storage-class", o.StorageClass, "render the default StorageClass "+CSIStorageClass+" (WaitForFirstConsumer, expansion allowed)")
}

// pullPolicy is a corev1.PullPolicy as a flag value.
type pullPolicy corev1.PullPolicy

func (p *pullPolicy) String() string     { return string(*p) }
func (p *pullPolicy) Set(v string) error { *p = pullPolicy(v); return nil }
func (p *pullPolicy) Type() string       { return "string" }

// validate returns every option that is wrong, as OptionErrors named by the flags of
// `nephele manifests csi`.
func (o CSIOptions) validate() error {
	var errs OptionErrors
	bad := func(option string, index int, value any, reason string) {
		errs = append(errs, &OptionError{Option: option, Index: index, Value: value, Reason: reason})
	}
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		bad("namespace", -1, o.Namespace, "want a namespace name: "+strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(o.DriverName); len(msgs) > 0 || len(o.DriverName) > 63 {
		bad("driver-name", -1, o.DriverName, "want a domain name of at most 63 characters, such as "+CSIDriverName)
	}
	for _, img := range []struct{ option, value string }{
		{"driver-image", o.DriverImage}, {"provisioner-image", o.ProvisionerImage},
		{"attacher-image", o.AttacherImage}, {"resizer-image", o.ResizerImage},
	} {
		if e := imageError(img.option, img.value); e != nil {
			errs = append(errs, e)
		}
	}
	if e := pullPolicyError(o.ImagePullPolicy); e != nil {
		errs = append(errs, e)
	}
	if o.ControllerReplicas < 1 {
		bad("controller-replicas", -1, o.ControllerReplicas, "want at least 1")
	}
	if o.MaxVolumesPerNode < 0 {
		bad("max-volumes-per-node", -1, o.MaxVolumesPerNode, "want 0 (none reported) or more")
	}
	// The node plugin mounts each device dir at its own path: one that is, holds or is
	// under another mount of the container (or of the device dirs before it) would
	// shadow it or be refused by the API server halfway through an apply.
	taken := []string{csiSocketDir, registrationDir, kubeletDir, "/dev"}
	for i, d := range o.DeviceDirs {
		if !filepath.IsAbs(d) || filepath.Clean(d) != d || d == "/" {
			bad("device-dir", i, d, "want the absolute, clean path of a directory other than /")
			continue
		}
		if j := slices.IndexFunc(o.ReservedDirs, func(t string) bool { return nested(d, t) }); j >= 0 {
			bad("device-dir", i, d, fmt.Sprintf("overlaps %s, which the installer mounts into every container", o.ReservedDirs[j]))
			continue
		}
		if j := slices.IndexFunc(taken, func(t string) bool { return nested(d, t) }); j >= 0 {
			bad("device-dir", i, d, fmt.Sprintf("overlaps %s, which the node plugin mounts already", taken[j]))
			continue
		}
		taken = append(taken, d)
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// nested reports whether one of the clean absolute paths a and b is the other or lies
// under it.
func nested(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// RenderCSI validates o and returns the CSI driver's objects in the order `kubectl
// apply` should create them: the ServiceAccounts and their RBAC (least privilege: the
// sidecars' documented rules and nothing else), the CSIDriver, the controller
// Deployment (the driver beside external-provisioner, -attacher and -resizer), the node
// plugin DaemonSet and the default StorageClass. The controller's cloud config Secret
// (CSICloudConfigSecret) is the installer's to create, as the CCM's is.
func RenderCSI(o CSIOptions) ([]*unstructured.Unstructured, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	typed := o.csiRBAC()
	typed = append(typed, o.csiDriver(), o.csiController(), o.csiNode())
	if o.StorageClass {
		typed = append(typed, o.storageClass())
	}
	return toUnstructured(typed)
}

// CSISelectorLabels select every pod of the CSI driver, the controller's and the node
// plugin's.
var CSISelectorLabels = map[string]string{"app.kubernetes.io/name": "nephele-csi"}

// csiSelector selects the pods of one part: CSISelectorLabels and the component.
func csiSelector(component string) map[string]string {
	l := maps.Clone(CSISelectorLabels)
	l["app.kubernetes.io/component"] = component
	return l
}

// csiLabels are the labels of every CSI object of component: its selector's and
// part-of.
func csiLabels(component string) map[string]string {
	l := csiSelector(component)
	l["app.kubernetes.io/part-of"] = "nephele"
	return l
}

func rule(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
}

// CSIControllerRules are what the controller's sidecars need cluster-wide: each
// sidecar's own RBAC (deploy/kubernetes/rbac.yaml of external-provisioner v6,
// external-attacher v4 and external-resizer v2) merged per resource, less what the audit
// log shows none of them uses in this deployment (TestCSIInCluster): snapshot and
// capacity rules, a get where an informer's cache answers, events read back, pods (the
// resizer watches them only with --handle-volume-inuse-error). Lists stay beside
// watches: an informer lists when the API server streams no list in its watch.
var CSIControllerRules = []rbacv1.PolicyRule{
	rule("", []string{"persistentvolumes"}, "list", "watch", "create", "delete", "patch"),
	rule("", []string{"persistentvolumeclaims"}, "list", "watch", "update"),
	rule("", []string{"persistentvolumeclaims/status"}, "patch"),
	rule("", []string{"events"}, "create", "patch"),
	rule("", []string{"nodes"}, "list", "watch"),
	rule("storage.k8s.io", []string{"storageclasses", "csinodes", "volumeattributesclasses"}, "list", "watch"),
	rule("storage.k8s.io", []string{"volumeattachments"}, "list", "watch", "patch"),
	rule("storage.k8s.io", []string{"volumeattachments/status"}, "patch"),
}

// CSILeaseRules are the controller's leader election rules in its namespace: each
// sidecar's lease, read, created and renewed.
var CSILeaseRules = []rbacv1.PolicyRule{
	rule("coordination.k8s.io", []string{"leases"}, "get", "create", "update"),
}

// CSINodeRules are the node plugin's: reading its own Node's zone label.
var CSINodeRules = []rbacv1.PolicyRule{rule("", []string{"nodes"}, "get")}

func (o CSIOptions) csiRBAC() []any {
	rbac := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: kind}
	}
	var objs []any
	for _, id := range []struct {
		name, component string
		rules           []rbacv1.PolicyRule
	}{{CSIControllerName, "controller", CSIControllerRules}, {CSINodeName, "node", CSINodeRules}} {
		subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: id.name, Namespace: o.Namespace}}
		objs = append(objs,
			&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
				ObjectMeta: metav1.ObjectMeta{Name: id.name, Namespace: o.Namespace, Labels: csiLabels(id.component)}},
			&rbacv1.ClusterRole{TypeMeta: rbac("ClusterRole"),
				ObjectMeta: metav1.ObjectMeta{Name: id.name, Labels: csiLabels(id.component)}, Rules: id.rules},
			&rbacv1.ClusterRoleBinding{TypeMeta: rbac("ClusterRoleBinding"),
				ObjectMeta: metav1.ObjectMeta{Name: id.name, Labels: csiLabels(id.component)},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: id.name},
				Subjects:   subject})
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: CSIControllerName, Namespace: o.Namespace}}
	objs = append(objs,
		&rbacv1.Role{TypeMeta: rbac("Role"),
			ObjectMeta: metav1.ObjectMeta{Name: CSIControllerName, Namespace: o.Namespace, Labels: csiLabels("controller")},
			Rules:      CSILeaseRules},
		&rbacv1.RoleBinding{TypeMeta: rbac("RoleBinding"),
			ObjectMeta: metav1.ObjectMeta{Name: CSIControllerName, Namespace: o.Namespace, Labels: csiLabels("controller")},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: CSIControllerName},
			Subjects:   subject})
	return objs
}

func (o CSIOptions) csiDriver() *storagev1.CSIDriver {
	fsGroup := storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
	return &storagev1.CSIDriver{
		TypeMeta:   metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "CSIDriver"},
		ObjectMeta: metav1.ObjectMeta{Name: o.DriverName, Labels: csiLabels("driver")},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired:       ptr.To(true),
			PodInfoOnMount:       ptr.To(false),
			FSGroupPolicy:        &fsGroup,
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
		},
	}
}

// socketMount mounts the directory of the driver's socket (an emptyDir in the
// controller's pod, kubelet's plugin directory on a node).
func socketMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: "socket-dir", MountPath: csiSocketDir}
}

func (o CSIOptions) sidecar(name, image string, args ...string) corev1.Container {
	return corev1.Container{
		Name:            name,
		Image:           image,
		ImagePullPolicy: o.ImagePullPolicy,
		Args: append([]string{"--csi-address=" + path.Join(csiSocketDir, "csi.sock"), "--leader-election",
			"--leader-election-namespace=" + o.Namespace, "--timeout=60s", "--v=2"}, args...),
		VolumeMounts:    []corev1.VolumeMount{socketMount()},
		SecurityContext: restricted(),
	}
}

// restricted is the restricted Pod Security profile's container context.
func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To[int64](nonRootID),
		RunAsGroup:               ptr.To[int64](nonRootID),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func (o CSIOptions) csiController() *appsv1.Deployment {
	labels := csiLabels("controller")
	driver := corev1.Container{
		Name:            "csi-driver",
		Image:           o.DriverImage,
		ImagePullPolicy: o.ImagePullPolicy,
		Args: []string{"--mode=controller", "--endpoint=" + path.Join(csiSocketDir, "csi.sock"),
			"--driver-name=" + o.DriverName, "--cloud-config=" + path.Join(csiCloudConfigDir, CSICloudConfigKey)},
		VolumeMounts: []corev1.VolumeMount{socketMount(),
			{Name: "cloud-config", MountPath: csiCloudConfigDir, ReadOnly: true}},
		// The controller only calls the cloud: it runs unprivileged like the sidecars.
		SecurityContext: restricted(),
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: CSIControllerName, Namespace: o.Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(o.ControllerReplicas),
			Selector: &metav1.LabelSelector{MatchLabels: csiSelector("controller")},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: CSIControllerName,
					PriorityClassName:  priorityClass,
					Containers: []corev1.Container{driver,
						// Topology needs no flag since external-provisioner v5: it follows the
						// driver's VOLUME_ACCESSIBILITY_CONSTRAINTS capability. The default
						// fstype is the driver's (csi.DefaultFSType; a test keeps them equal),
						// written into each PersistentVolume: kubelet applies fsGroup
						// (ReadWriteOnceWithFSType) only to volumes that name one.
						o.sidecar("csi-provisioner", o.ProvisionerImage, "--default-fstype="+csiDefaultFSType),
						o.sidecar("csi-attacher", o.AttacherImage),
						o.sidecar("csi-resizer", o.ResizerImage, "--handle-volume-inuse-error=false"),
					},
					Volumes: []corev1.Volume{
						{Name: "socket-dir", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "cloud-config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
							SecretName: CSICloudConfigSecret, DefaultMode: ptr.To[int32](0o440)}}},
					},
					SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr.To[int64](nonRootID)},
					Tolerations: []corev1.Toleration{
						{Key: labelControlPlane, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
						{Key: tolerationCriticalAddonsOnly, Operator: corev1.TolerationOpExists},
					},
				},
			},
		},
	}
}

func (o CSIOptions) csiNode() *appsv1.DaemonSet {
	labels := csiLabels("node")
	pluginDir := path.Join(kubeletDir, "plugins", o.DriverName)
	bidirectional := corev1.MountPropagationBidirectional
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	dir := corev1.HostPathDirectory
	hostPath := func(name, p string, t *corev1.HostPathType) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p, Type: t}}}
	}
	volumes := []corev1.Volume{
		hostPath("socket-dir", pluginDir, &dirOrCreate),
		hostPath("registration-dir", path.Join(kubeletDir, "plugins_registry"), &dir),
		hostPath("kubelet-dir", kubeletDir, &dir),
		hostPath("dev", "/dev", &dir),
	}
	mounts := []corev1.VolumeMount{
		socketMount(),
		{Name: "registration-dir", MountPath: registrationDir},
		// Staging and publishing mount under kubelet's directory: Bidirectional brings
		// the driver's mounts back to the node, where kubelet and the pods see them.
		{Name: "kubelet-dir", MountPath: kubeletDir, MountPropagation: &bidirectional},
		// No propagation on /dev and the device dirs: a loop device or link made after
		// the container started is a new file on the same file system, which a plain bind
		// shows; and a node whose /dev is a private mount (a machine's may be) takes none.
		{Name: "dev", MountPath: "/dev"},
	}
	for i, d := range o.DeviceDirs {
		name := fmt.Sprintf("device-dir-%d", i)
		volumes = append(volumes, hostPath(name, d, &dir))
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: d, ReadOnly: true})
	}
	args := []string{"--mode=node", "--endpoint=" + path.Join(csiSocketDir, "csi.sock"), "--driver-name=" + o.DriverName,
		"--node-name=$(NODE_NAME)", fmt.Sprintf("--max-volumes-per-node=%d", o.MaxVolumesPerNode),
		"--kubelet-registration-dir=" + registrationDir, "--kubelet-endpoint=" + path.Join(pluginDir, "csi.sock")}
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: CSINodeName, Namespace: o.Namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: csiSelector("node")},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: CSINodeName,
					PriorityClassName:  "system-node-critical",
					Containers: []corev1.Container{{
						Name:            "csi-driver",
						Image:           o.DriverImage,
						ImagePullPolicy: o.ImagePullPolicy,
						Args:            args,
						Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
						VolumeMounts: mounts,
						// Formatting and mounting a node's block devices is root's work
						// on the node: privileged, as every block CSI node plugin.
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
					}},
					Volumes: volumes,
					// On every node, whatever its taints: a node's volumes are unmounted
					// by its plugin, also while it drains.
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				},
			},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
		},
	}
}

func (o CSIOptions) storageClass() *storagev1.StorageClass {
	binding := storagev1.VolumeBindingWaitForFirstConsumer
	reclaim := corev1.PersistentVolumeReclaimDelete
	return &storagev1.StorageClass{
		TypeMeta: metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta: metav1.ObjectMeta{Name: CSIStorageClass, Labels: csiLabels("storageclass"),
			Annotations: map[string]string{defaultStorageClassAnnotation: "true"}},
		Provisioner:          o.DriverName,
		ReclaimPolicy:        &reclaim,
		VolumeBindingMode:    &binding,
		AllowVolumeExpansion: ptr.To(true),
	}
}
