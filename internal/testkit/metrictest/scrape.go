package metrictest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

// Families is a scraped exposition: metric families by name.
type Families map[string]*dto.MetricFamily

// Scrape reads the exposition a test's own server (a manager it started) serves at url
// over HTTPS, with token as the bearer token. The server's certificate is not verified:
// the test made the server, and checks its authentication elsewhere. It retries until
// the server answers 200 (it may still be starting) and fails the test at the poll
// deadline.
func Scrape(t testing.TB, url, token string) Families {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var families Families
	poll.Eventually(t, url+" to answer", func() error {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s = %s", url, resp.Status)
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		families, err = parser.TextToMetricFamilies(resp.Body)
		return err
	})
	return families
}

// Value returns the value of metric name, summed over its series whose labels include
// labels, as the package's Value does for a registry; 0 when no series matches.
func (f Families) Value(name string, labels map[string]string) float64 {
	var sum float64
	for _, m := range f[name].GetMetric() {
		if has(m, labels) {
			sum += value(m)
		}
	}
	return sum
}
