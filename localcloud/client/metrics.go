package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// requestsMetric is the server's call counter.
const requestsMetric = "localcloud_requests_total"

// CallCounts are the calls the local cloud answered: operation -> HTTP status -> count.
type CallCounts map[string]map[int]uint64

// Total returns the calls of an operation, whatever their answer.
func (cc CallCounts) Total(operation string) uint64 {
	var n uint64
	for _, v := range cc[operation] {
		n += v
	}
	return n
}

// Code returns the calls of an operation answered with code.
func (cc CallCounts) Code(operation string, code int) uint64 { return cc[operation][code] }

// Since returns the calls made after before was taken.
func (cc CallCounts) Since(before CallCounts) CallCounts {
	out := CallCounts{}
	for op, codes := range cc {
		for code, n := range codes {
			prev := before[op][code]
			if n <= prev {
				continue
			}
			if out[op] == nil {
				out[op] = map[int]uint64{}
			}
			out[op][code] = n - prev
		}
	}
	return out
}

// CallCounts reads the server's per-operation call counters from /metrics, for tests
// and benchmarks that count cloud calls.
func (c *Client) CallCounts(ctx context.Context) (CallCounts, error) {
	u, err := c.url("/metrics")
	if err != nil {
		return nil, fmt.Errorf("local cloud: reading metrics: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("local cloud: reading metrics: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("User-Agent", c.userAgent)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("local cloud: reading metrics: %w", err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return nil, answerError(req, resp)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("local cloud: parsing metrics: %w", err)
	}
	out := CallCounts{}
	fam, ok := families[requestsMetric]
	if !ok {
		return out, nil
	}
	for _, m := range fam.GetMetric() {
		var op string
		code := -1
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "operation":
				op = l.GetValue()
			case "code":
				if n, err := strconv.Atoi(l.GetValue()); err == nil {
					code = n
				}
			}
		}
		if op == "" || code < 0 || m.GetCounter() == nil {
			return nil, fmt.Errorf("local cloud: metric %s has an unexpected sample %v", requestsMetric, m)
		}
		if out[op] == nil {
			out[op] = map[int]uint64{}
		}
		out[op][code] += uint64(m.GetCounter().GetValue())
	}
	return out, nil
}
