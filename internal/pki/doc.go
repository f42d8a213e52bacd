// Package pki makes the certificate authorities nephele's local components run on: one
// authority per purpose (etcd's, the local cloud's API), each signing only the
// certificates of that purpose, so a certificate of one never opens another.
package pki
