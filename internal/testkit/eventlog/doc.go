// Package eventlog is an in-memory record.EventRecorder for tests: it keeps every Event
// with the object it is about, so a test can assert which Events a controller emitted.
// client-go's record.FakeRecorder drops the object and blocks or drops once its channel
// is full, which makes "no Event of this reason on that Node" impossible to assert.
package eventlog
