package faults

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nephele-dev/nephele/localcloud/api"
)

// ParseRule parses the flag form of a fault rule:
//
//	OPERATION:KNOB[,KNOB...]
//
// OPERATION is an operation name, "group.*" or "*". Knobs:
//
//	latency=200ms            fixed latency
//	latency=50ms-200ms       uniform between the two
//	latency=100ms+-20ms      normal: mean +- standard deviation ("±" works too)
//	errors=0.1               error rate (fraction, or "10%"), answered 500
//	rate=5                   throttle to 5 calls per second ("5/s", "300/m", "10/h")
//	burst=10                 bucket size for rate (default: one second's worth, at least 1)
//	cost=10                  a call takes 10 tokens of every rate limit it meets (default 1)
//	outage                   answer 503
//	unimplemented            answer 501
//	invisible=5s             hide instances younger than 5s (eventual consistency)
//
// For example "lb.ensure:latency=200ms" or "*:rate=10/s,burst=20,errors=5%".
func ParseRule(s string) (api.Fault, error) {
	op, knobs, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || strings.TrimSpace(knobs) == "" {
		return api.Fault{}, fmt.Errorf("fault %q: want OPERATION:KNOB[,KNOB...], e.g. lb.ensure:latency=200ms", s)
	}
	f := api.Fault{Operation: strings.TrimSpace(op)}
	burst := -1
	for _, knob := range strings.Split(knobs, ",") {
		key, val, hasVal := strings.Cut(strings.TrimSpace(knob), "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		need := func() error {
			if !hasVal || val == "" {
				return fmt.Errorf("fault %q: knob %s needs a value", s, key)
			}
			return nil
		}
		var err error
		switch key {
		case "latency":
			if err = need(); err == nil {
				f.Latency, err = parseLatency(val)
			}
		case "errors", "error-rate", "errorRate":
			if err = need(); err == nil {
				f.ErrorRate, err = parseFraction(val)
			}
		case "rate", "qps":
			if err = need(); err == nil {
				var qps float64
				qps, err = parseRate(val)
				if f.RateLimit == nil {
					f.RateLimit = &api.RateLimit{}
				}
				f.RateLimit.QPS = qps
			}
		case "burst":
			if err = need(); err == nil {
				burst, err = strconv.Atoi(val)
				if err == nil && burst < 1 {
					err = fmt.Errorf("burst %d: want 1 or more", burst)
				}
			}
		case "cost":
			if err = need(); err == nil {
				f.Cost, err = strconv.Atoi(val)
				if err == nil && f.Cost < 1 {
					err = fmt.Errorf("cost %d: want 1 or more tokens", f.Cost)
				}
			}
		case "outage":
			f.Outage = true
		case "unimplemented", "notImplemented", "not-implemented":
			f.NotImplemented = true
		case "invisible", "invisibleFor", "invisible-for":
			if err = need(); err == nil {
				f.InvisibleFor.Duration, err = time.ParseDuration(val)
			}
		default:
			err = fmt.Errorf("unknown knob %q: want latency, errors, rate, burst, cost, outage, unimplemented or invisible", key)
		}
		if err != nil {
			return api.Fault{}, fmt.Errorf("fault %q: %w", s, err)
		}
		if hasVal && (key == "outage" || key == "unimplemented" || key == "notImplemented" || key == "not-implemented") {
			return api.Fault{}, fmt.Errorf("fault %q: knob %s takes no value", s, key)
		}
	}
	if burst >= 0 {
		if f.RateLimit == nil {
			return api.Fault{}, fmt.Errorf("fault %q: burst needs rate", s)
		}
		f.RateLimit.Burst = burst
	}
	if err := f.Validate("fault"); err != nil {
		return api.Fault{}, fmt.Errorf("fault %q: %w", s, err)
	}
	return f, nil
}

func parseLatency(v string) (*api.Latency, error) {
	dur := func(s string) (api.Duration, error) {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return api.Duration{}, fmt.Errorf("latency %q: %w", v, err)
		}
		return api.Duration{Duration: d}, nil
	}
	for _, sep := range []string{"+-", "±"} {
		if mean, sd, ok := strings.Cut(v, sep); ok {
			m, err := dur(mean)
			if err != nil {
				return nil, err
			}
			s, err := dur(sd)
			if err != nil {
				return nil, err
			}
			return &api.Latency{Distribution: api.DistributionNormal, Mean: m, StdDev: s}, nil
		}
	}
	if lo, hi, ok := strings.Cut(v, "-"); ok && lo != "" {
		minD, err := dur(lo)
		if err != nil {
			return nil, err
		}
		maxD, err := dur(hi)
		if err != nil {
			return nil, err
		}
		return &api.Latency{Distribution: api.DistributionUniform, Min: minD, Max: maxD}, nil
	}
	d, err := dur(v)
	if err != nil {
		return nil, err
	}
	return &api.Latency{Fixed: d}, nil
}

func parseFraction(v string) (float64, error) {
	scale := 1.0
	if p, ok := strings.CutSuffix(v, "%"); ok {
		v, scale = p, 100
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, fmt.Errorf("error rate %q: want a fraction (0.1) or a percentage (10%%)", v)
	}
	return f / scale, nil
}

func parseRate(v string) (float64, error) {
	num, unit, _ := strings.Cut(v, "/")
	per := time.Second
	switch unit {
	case "", "s":
	case "m":
		per = time.Minute
	case "h":
		per = time.Hour
	default:
		return 0, fmt.Errorf("rate %q: want N, N/s, N/m or N/h", v)
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("rate %q: want N, N/s, N/m or N/h", v)
	}
	return n / per.Seconds(), nil
}
