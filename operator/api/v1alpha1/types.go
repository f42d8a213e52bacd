package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SingletonName is the only name a CloudControllerManager may have: a cluster runs one
// CCM, and two resources would fight over its objects.
const SingletonName = "cluster"

// ManagementState says how far the operator manages the CCM.
// +kubebuilder:validation:Enum=Managed;Unmanaged;Removed
type ManagementState string

// The management states.
const (
	// Managed: the operator renders, applies and watches the CCM's objects.
	Managed ManagementState = "Managed"
	// Unmanaged: the operator leaves the CCM's objects as they are and only reports.
	Unmanaged ManagementState = "Unmanaged"
	// Removed: the operator deletes the CCM's objects (never Nodes or cloud resources).
	Removed ManagementState = "Removed"
)

// ConfigSourceKind is the kind of object a cloud config or CA bundle is read from.
// +kubebuilder:validation:Enum=ConfigMap;Secret
type ConfigSourceKind string

// The source kinds.
const (
	SourceConfigMap ConfigSourceKind = "ConfigMap"
	SourceSecret    ConfigSourceKind = "Secret"
)

// CloudControllerManager is the cluster's cloud-controller-manager as the operator
// manages it. There is one, named "cluster".
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ccm
// +kubebuilder:printcolumn:name="Platform",type=string,JSONPath=`.spec.platform`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.spec.managementState`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Degraded",type=string,JSONPath=`.status.conditions[?(@.type=="Degraded")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'cluster'",message="a cluster has one CloudControllerManager and it is named cluster"
type CloudControllerManager struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the CCM the cluster should run.
	// +required
	Spec CloudControllerManagerSpec `json:"spec"`
	// Status is what the operator observed.
	// +optional
	Status CloudControllerManagerStatus `json:"status,omitempty"`
}

// CloudControllerManagerSpec is the CCM the cluster should run.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.image) && has(self.version))",message="set image or version, not both: version picks a tag of the platform's image, image names one outright"
// +kubebuilder:validation:XValidation:rule="!has(self.featureGates) || !has(self.extraArgs) || self.extraArgs.all(a, !a.startsWith('--feature-gates'))",message="feature gates go in featureGates, not in extraArgs"
type CloudControllerManagerSpec struct {
	// ManagementState is Managed (default), Unmanaged or Removed.
	// +kubebuilder:default=Managed
	// +optional
	ManagementState ManagementState `json:"managementState,omitempty"`

	// Platform names the profile that says which objects make up the CCM: local,
	// generic, generic-node-manager, or another the operator was built with.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Platform string `json:"platform"`

	// Provider is the CCM's --cloud-provider; default the profile's.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Provider string `json:"provider,omitempty"`

	// Version is the tag of the profile's image to run; default the operator's own
	// version. Changing it upgrades or downgrades the CCM.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`
	// +optional
	Version string `json:"version,omitempty"`

	// Image is the whole image reference to run instead of the profile's image at
	// Version; required by profiles without an image of their own (generic).
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains(' ')",message="an image reference has no spaces"
	// +optional
	Image string `json:"image,omitempty"`

	// Replicas of the CCM Deployment; default 2, or 1 on a cluster with one node.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Controllers is the CCM's --controllers; default ["*"].
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^-?(\*|[a-z][-a-z]*)$`
	// +listType=atomic
	// +optional
	Controllers []string `json:"controllers,omitempty"`

	// ClusterName is the CCM's --cluster-name; default kubernetes.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ClusterName string `json:"clusterName,omitempty"`

	// ClusterCIDR is the pod range (the CCM's --cluster-cidr), needed while cloud routes
	// are configured; default the profile's.
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="self.split(',').all(c, isCIDR(c))",message="want one CIDR or two (one IPv4, one IPv6) separated by a comma"
	// +optional
	ClusterCIDR string `json:"clusterCIDR,omitempty"`

	// ConfigureCloudRoutes is the CCM's --configure-cloud-routes; default the profile's.
	// +optional
	ConfigureCloudRoutes *bool `json:"configureCloudRoutes,omitempty"`

	// CloudConfig is where the provider's configuration file is read from. The operator
	// copies it, transformed as the profile says, into the CCM's namespace.
	// +optional
	CloudConfig *ConfigSource `json:"cloudConfig,omitempty"`

	// TrustedCA is a ConfigMap or Secret key holding PEM certificates the CCM trusts
	// beside the operator's system bundle and the cloud config's own CA.
	// +optional
	TrustedCA *ConfigSource `json:"trustedCA,omitempty"`

	// ExtraArgs are further flags of the CCM, each --name=value.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Pattern=`^--[a-z][-a-z0-9]*=.*$`
	// +listType=atomic
	// +optional
	ExtraArgs []string `json:"extraArgs,omitempty"`

	// FeatureGates are the CCM's --feature-gates, for profiles whose image has them.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[A-Z][A-Za-z0-9]*$'))",message="a feature gate's name is CamelCase letters and digits"
	// +optional
	FeatureGates map[string]bool `json:"featureGates,omitempty"`

	// NodePlacement narrows the nodes the CCM's pods run on and adds tolerations to
	// those every profile has (uninitialized, not-ready, control plane).
	// +optional
	NodePlacement *NodePlacement `json:"nodePlacement,omitempty"`

	// Volumes, when set, runs the cloud's CSI driver beside the CCM: nephele's driver
	// serving the platform's provider, its sidecars and the default StorageClass, for
	// platforms whose profile has a driver (local). Unset removes what the operator ran.
	// +optional
	Volumes *Volumes `json:"volumes,omitempty"`
}

// Volumes is the cloud's CSI driver as the operator runs it (docs/volumes.md).
type Volumes struct {
	// CloudConfig is the driver's own cloud config: a credential of the cloud's volume
	// role, never the CCM's. Read from the config namespace like spec.cloudConfig and
	// copied, transformed as the profile says, to the Secret the driver's controller
	// mounts (nephele-csi-cloud-config, key cloud.yaml).
	// +required
	CloudConfig ConfigSource `json:"cloudConfig"`

	// Image is nephele's csi-driver image; default the profile's driver image at
	// spec.version (or the operator's version).
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains(' ')",message="an image reference has no spaces"
	// +optional
	Image string `json:"image,omitempty"`

	// ProvisionerImage is external-provisioner's image; default the version nephele
	// pins (v6, as `make node-images` builds it).
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains(' ')",message="an image reference has no spaces"
	// +optional
	ProvisionerImage string `json:"provisionerImage,omitempty"`
	// AttacherImage is external-attacher's image; default the version nephele pins (v4).
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains(' ')",message="an image reference has no spaces"
	// +optional
	AttacherImage string `json:"attacherImage,omitempty"`
	// ResizerImage is external-resizer's image; default the version nephele pins (v2).
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains(' ')",message="an image reference has no spaces"
	// +optional
	ResizerImage string `json:"resizerImage,omitempty"`

	// DeviceDirs are directories of the nodes, outside /dev, that the cloud's device
	// paths lead through, mounted read-only into the node plugin (the local cloud's:
	// its hosts' directory). A cloud whose devices are under /dev needs none.
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=4096
	// +listType=atomic
	// +optional
	DeviceDirs []string `json:"deviceDirs,omitempty"`

	// StorageClass says whether the operator runs the default StorageClass nephele
	// (WaitForFirstConsumer, expansion allowed); default true.
	// +optional
	StorageClass *bool `json:"storageClass,omitempty"`
}

// ConfigSource is one key of a ConfigMap or Secret, in any namespace.
type ConfigSource struct {
	// Kind is ConfigMap or Secret.
	// +required
	Kind ConfigSourceKind `json:"kind"`
	// Namespace of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Namespace string `json:"namespace"`
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`
	// Key holding the file; default cloud.conf for a cloud config, ca-bundle.crt for
	// trusted CAs.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	Key string `json:"key,omitempty"`
}

// NodePlacement narrows where the CCM's pods run.
type NodePlacement struct {
	// NodeSelector is added to the pods' node selector.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations are added to the pods' tolerations.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// Condition types the operator sets on a CloudControllerManager.
const (
	// ConditionAvailable: the CCM Deployment is available and a leader holds its lease.
	ConditionAvailable = "Available"
	// ConditionProgressing: a rollout is incomplete, or the objects just changed.
	ConditionProgressing = "Progressing"
	// ConditionDegraded: the operator cannot make the CCM what the spec says; the
	// message names the object and the fix. Transient errors count after two minutes.
	ConditionDegraded = "Degraded"
	// ConditionUpgradeable: changing the version now is safe (not Degraded, Managed).
	ConditionUpgradeable = "Upgradeable"
	// ConditionCloudConfigSynced: the cloud config is copied into the CCM's namespace.
	ConditionCloudConfigSynced = "CloudConfigSynced"
	// ConditionTrustedCABundleSynced: the trusted CA bundle is written.
	ConditionTrustedCABundleSynced = "TrustedCABundleSynced"
)

// CloudControllerManagerStatus is what the operator observed.
type CloudControllerManagerStatus struct {
	// ObservedGeneration is the spec generation the main controller last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Available, Progressing, Degraded, Upgradeable, CloudConfigSynced
	// and TrustedCABundleSynced.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Versions are the operand versions that run, set when a rollout completes.
	// +listType=map
	// +listMapKey=name
	// +optional
	Versions []OperandVersion `json:"versions,omitempty"`
	// Resources are the objects the operator applied and owns.
	// +listType=atomic
	// +optional
	Resources []ObjectReference `json:"resources,omitempty"`
}

// OperandVersion is the version and image one operand runs at.
type OperandVersion struct {
	// Name of the operand: the Deployment or DaemonSet.
	Name string `json:"name"`
	// Version is the tag, or the whole reference when the spec named an image.
	Version string `json:"version"`
	// Image is the reference the pods run.
	Image string `json:"image"`
}

// ObjectReference names an object the operator owns.
type ObjectReference struct {
	// Group of the object's kind; empty for the core group.
	// +optional
	Group string `json:"group,omitempty"`
	// Kind of the object.
	Kind string `json:"kind"`
	// Namespace, empty for a cluster-scoped object.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	Name string `json:"name"`
}

// CloudControllerManagerList is a list of CloudControllerManagers.
//
// +kubebuilder:object:root=true
type CloudControllerManagerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the CloudControllerManagers.
	Items []CloudControllerManager `json:"items"`
}
