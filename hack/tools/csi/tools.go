//go:build tools

// Package tools pins the CSI sidecars nephele's CSI driver runs beside, the real ones
// from the Kubernetes CSI project: external-provisioner (PVC to CreateVolume),
// external-attacher (VolumeAttachment to ControllerPublishVolume) and external-resizer
// (a PVC's new size to ControllerExpandVolume). It is its own module because the sidecars
// pin their own k8s.io versions. `make csi-bins` builds them into bin/.
package tools

import (
	_ "github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher"
	_ "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"
	_ "github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer"
)
