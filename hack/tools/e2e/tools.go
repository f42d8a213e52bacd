//go:build tools

package e2e

import (
	// The ginkgo v2 CLI runs e2e.test on parallel nodes; agnhost, nonewprivs,
	// regression-issue-74839 and sample-apiserver are programs of the suite's test
	// images. All are built from this module, so that their versions are the ones
	// k8s.io/kubernetes v1.36.3 requires, as upstream's own build takes them.
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/images/nonewprivs"
	_ "k8s.io/kubernetes/test/images/regression-issue-74839"
	_ "k8s.io/sample-apiserver"
)
