// Package clouds reads the --clouds-config file: the clouds one manager serves at once,
// each with its own provider, cloud config (and so its own credentials), provider-ID
// schemes and load balancer class, one of them the default for Services without a
// class and for nodes that declare no platform. See docs/hybrid.md.
//
// The file is decoded strictly, and every problem is reported at once, each naming its
// field (clouds[1].loadBalancerClass) and what to write instead. What needs the built
// providers (two clouds whose providers claim one provider-ID scheme) is checked by the
// manager when it builds them.
package clouds
