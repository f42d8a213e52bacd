// Package scheme builds the runtime.Scheme nephele-operator's clients use: Kubernetes'
// built-in types, CustomResourceDefinitions and the operator's own API.
package scheme

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/nephele-dev/nephele/operator/api/v1alpha1"
)

// New returns a new scheme with the built-in types, apiextensions/v1 and
// operator.nephele.dev/v1alpha1; each call its own, so nothing is shared.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}
