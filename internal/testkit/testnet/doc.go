// Package testnet is what tests need on the loopback network: free ports, TCP and UDP
// echo backends that say who answered (stand-ins for a node's kube-proxy behind a load
// balancer), a kube-proxy-like /healthz server, a TCP proxy (for a program in a network
// namespace of its own to reach a server on the machine's loopback), and clients bound to
// a chosen source address.
//
// Every server stops when its test ends. Linux routes all of 127.0.0.0/8 to the
// loopback device, so a test can give each simulated node, VIP or client an address of
// its own there without setting anything up.
package testnet
