//go:build tools

package e2e

// The ginkgo v2 CLI runs e2e.test on parallel nodes; it is built from this module so
// that its version is the one k8s.io/kubernetes requires, as upstream's own build does.
import _ "github.com/onsi/ginkgo/v2/ginkgo"
