package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of this package's types.
var GroupVersion = schema.GroupVersion{Group: "operator.nephele.dev", Version: "v1alpha1"}

// AddToScheme registers this package's types in a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &CloudControllerManager{}, &CloudControllerManagerList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
