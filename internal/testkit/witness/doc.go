// Package witness is the handover scenarios' view of the cloud: a Witness is a recording
// proxy in front of a local cloud (one front per manager replica, so every call is known
// by who made it), whose log is what judges a scenario (which replica called what, and
// when), and whose interceptor can drop a call or act before and after it (to kill a
// replica at a chosen step). A CutProxy sits between a replica and the apiserver and cuts
// the connection on demand, to partition a leader from the apiserver but not the cloud.
// handover/scenario and bench/handover use them.
package witness
