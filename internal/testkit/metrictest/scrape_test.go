package metrictest

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestScrape(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t0ken" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("# TYPE calls_total counter\ncalls_total{op=\"a\"} 2\ncalls_total{op=\"b\"} 3\n"))
	}))
	defer srv.Close()
	f := Scrape(t, srv.URL, "t0ken")
	for _, tc := range []struct {
		labels map[string]string
		want   float64
	}{{nil, 5}, {map[string]string{"op": "b"}, 3}, {map[string]string{"op": "c"}, 0}} {
		if got := f.Value("calls_total", tc.labels); got != tc.want {
			t.Errorf("Value(calls_total, %v) = %v, want %v", tc.labels, got, tc.want)
		}
	}
	if got := f.Value("absent_total", nil); got != 0 {
		t.Errorf("an absent family = %v, want 0", got)
	}
}
