package controllers

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
)

// Field managers: one per controller, so each owns exactly what it writes.
const (
	FieldManagerOperand     = "nephele-operator"
	FieldManagerCloudConfig = "nephele-operator-cloud-config-sync"
	FieldManagerTrustedCA   = "nephele-operator-trusted-ca-sync"
)

// Finalizer keeps a deleted CloudControllerManager until its CCM is de-provisioned.
const Finalizer = "operator.nephele.dev/deprovision"

// LabelComponent tells the operand objects (pruned when a rendering drops them) from
// the sync controllers' outputs.
const (
	LabelComponent     = "operator.nephele.dev/component"
	ComponentOperand   = "operand"
	ComponentSync      = "sync"
	cloudConfigCAKey   = "ca-bundle.pem"
	defaultCloudConfig = "cloud.conf"
)

// Condition reasons.
const (
	ReasonAsExpected        = "AsExpected"
	ReasonRolloutInProgress = "RolloutInProgress"
	ReasonApplied           = "ObjectsChanged"
	ReasonUnknownPlatform   = "UnknownPlatform"
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonApplyFailed       = "ApplyFailed"
	ReasonDeploymentFailed  = "ProgressDeadlineExceeded"
	ReasonNoLeader          = "NoLeader"
	ReasonNotAvailable      = "DeploymentNotAvailable"
	ReasonWaitingForConfig  = "WaitingForConfig"
	ReasonCloudConfigFailed = "CloudConfigNotSynced"
	ReasonUnmanaged         = "Unmanaged"
	ReasonRemoved           = "Removed"
	ReasonSourceNotFound    = "SourceNotFound"
	ReasonSourceInvalid     = "SourceInvalid"
	ReasonSourceNotAllowed  = "SourceNotAllowed"
	ReasonSyncFailed        = "SyncFailed"
	ReasonNoSource          = "NoSource"
	ReasonSynced            = "Synced"
)

// singleton is the key of the one CloudControllerManager.
var singleton = types.NamespacedName{Name: v1alpha1.SingletonName}
