// Package provider is the example cloud's nephele provider: it implements
// cloud.Provider (instances, batch listing, load balancers and routes) on top of the
// example cloud's API (package examplecloud), the way a real provider wraps its cloud's
// SDK. Its cloud config is the JSON document described by Config.
//
// The interesting part is small and the same for every cloud:
//
//   - provider IDs are "example://<instance ID>", parsed with cloud.ParseProviderID;
//   - only the cloud's positive "no such object" (a 404 about the object asked for)
//     becomes cloud.ErrNotFound; 429 becomes a *cloud.ThrottledError with the cloud's
//     Retry-After, 400 cloud.ErrInvalid, and everything else (5xx, timeouts) stays a
//     temporary error;
//   - every load balancer and route call is idempotent even though the cloud's API is
//     not: deleting what is gone succeeds, creating what exists succeeds;
//   - every call passes its context on, so deadlines and cancellation are honored.
package provider
