// Package smallfile reads files that must be small (certificates, keys, tokens, config
// files) with a bound, so that a path naming a device, a FIFO or a huge file cannot stall or
// exhaust the process that reads it.
package smallfile
