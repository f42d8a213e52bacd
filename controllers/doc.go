// Package controllers lists nephele's cloud controllers for a manager: node
// initialization, node lifecycle, service load balancers and routes. A provider binary
// passes Default() to manager.NewCommand.
package controllers
