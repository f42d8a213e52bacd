// Package client is the typed Go client of the local cloud's API, written so that a
// cloud.Provider over it stays thin: its errors already speak the provider contract.
//
//   - 404 with reason NotFound wraps cloud.ErrNotFound (a positive "does not exist");
//     a 404 from anything else (an unknown endpoint, a proxy) does not.
//   - 429 is a *cloud.ThrottledError carrying the answer's Retry-After.
//   - 400 wraps cloud.ErrInvalid; errors.As with *Error gives the offending Field.
//   - 501 wraps cloud.ErrNotImplemented.
//   - Every other status, network errors and undecodable answers are temporary
//     errors that match none of those: in particular they never wrap ErrNotFound.
//
// ListAllInstances follows page tokens and fails as a whole when any page fails, so
// callers never mistake a short list for instances that are gone.
package client
