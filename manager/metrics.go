package manager

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/version"

	"github.com/nephele-dev/nephele/internal/promreg"
)

// managerMetrics are the manager's own metrics under upstream's names, beside nephele's:
// what dashboards and alerts written for upstream's cloud-controller-manager read.
// Upstream registers them in process-wide registries from init functions of
// component-base; here they are collectors of the manager's one registry, so two
// managers in one process (tests) keep theirs apart. docs/manager.md maps each name.
type managerMetrics struct {
	// leader is upstream's leader_election_master_status{name}.
	leader *prometheus.GaugeVec
	// running is upstream's running_managed_controllers{name,manager}.
	running *prometheus.GaugeVec
	// requests and latency are client-go's rest_client_requests_total{code,host,method}
	// and rest_client_request_duration_seconds{host,verb}.
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// restLatencyBuckets are client-go's (component-base's restclient metrics).
var restLatencyBuckets = []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0}

// newManagerMetrics registers the manager's upstream-named metrics on reg, and
// kubernetes_build_info with the binary's version.
func newManagerMetrics(reg prometheus.Registerer) (*managerMetrics, error) {
	m := &managerMetrics{
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leader_election_master_status",
			Help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. " +
				"'name' is the string used to identify the lease. Please make sure to group by name.",
		}, []string{"name"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "running_managed_controllers",
			Help: "Indicates where instances of a controller are currently running",
		}, []string{"name", "manager"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_requests_total",
			Help: "Number of HTTP requests, partitioned by status code, method, and host.",
		}, []string{"code", "host", "method"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rest_client_request_duration_seconds",
			Help:    "Request latency in seconds. Broken down by verb, and host.",
			Buckets: restLatencyBuckets,
		}, []string{"host", "verb"}),
	}
	var err error
	if m.leader, err = promreg.Register(reg, m.leader); err != nil {
		return nil, err
	}
	if m.running, err = promreg.Register(reg, m.running); err != nil {
		return nil, err
	}
	if m.requests, err = promreg.Register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.latency, err = promreg.Register(reg, m.latency); err != nil {
		return nil, err
	}
	info := version.Get()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubernetes_build_info",
		Help: "A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, " +
			"Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
	}, []string{"major", "minor", "git_version", "git_commit", "git_tree_state", "build_date", "go_version", "compiler", "platform"})
	if build, err = promreg.Register(reg, build); err != nil {
		return nil, err
	}
	build.WithLabelValues(info.Major, info.Minor, info.GitVersion, info.GitCommit, info.GitTreeState, info.BuildDate,
		info.GoVersion, info.Compiler, info.Platform).Set(1)
	return m, nil
}

// setRunning records whether controller runs, as upstream's controller manager does
// when it starts and stops one.
func (m *managerMetrics) setRunning(controller string, running bool) {
	v := 0.0
	if running {
		v = 1
	}
	m.running.WithLabelValues(controller, Component).Set(v)
}

// wrapTransport measures every apiserver request made through rt as client-go's
// metrics do (client-go reports them only to process-wide hooks).
func (m *managerMetrics) wrapTransport(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		start := time.Now()
		resp, err := rt.RoundTrip(req)
		m.latency.WithLabelValues(req.URL.Host, req.Method).Observe(time.Since(start).Seconds())
		code := "<error>" // client-go's label for a request that got no answer
		if err == nil {
			code = strconv.Itoa(resp.StatusCode)
		}
		m.requests.WithLabelValues(code, req.URL.Host, req.Method).Inc()
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
