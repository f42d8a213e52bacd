// Package v1alpha1 is the API of nephele's operator: the CloudControllerManager
// resource, one per cluster (named "cluster"), which says which platform profile's
// cloud-controller-manager (CCM) runs, at which version, with which cloud config and
// trusted CAs, and reports the CCM's health as conditions.
//
// Where it differs from OpenShift's cluster-cloud-controller-manager-operator: that
// operator reads OpenShift's Infrastructure, Proxy and FeatureGate objects and reports on
// a ClusterOperator; here the one resource carries both the desired state (spec) and
// the health (status), so the operator runs on any Kubernetes cluster. The CRD is
// generated from these types by controller-gen (make generate), with CEL rules that
// refuse at admission what can be refused there.
//
// +kubebuilder:object:generate=true
// +groupName=operator.nephele.dev
package v1alpha1
