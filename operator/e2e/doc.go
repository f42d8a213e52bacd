// Package e2e tests nephele-operator end to end on a real cluster (package
// localcluster: real kubelets and containerd on the local cloud's hosts, images pulled
// from the cluster's registry): the operator installed from its manifests with kubectl,
// a CloudControllerManager created, the CCM it runs initializing the Nodes, a cloud
// config change rolling the CCM, and Removed de-provisioning it with Nodes untouched.
// It needs root, as every real-node test.
package e2e
