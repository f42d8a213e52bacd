// Package logcap keeps the logs nephele's supervisors write under a size: when a log has
// grown past its cap, its content moves to <log>.1 (replacing the one before) and the
// log starts again, with a line saying so.
//
// The processes writing a log keep their descriptors, so the log is copied and
// truncated in place rather than renamed (logrotate's copytruncate): a writer must have
// opened the file with O_APPEND, so that its next write lands at the new end instead of
// leaving a hole. What a writer adds between the copy and the truncation is lost; the
// note says when. The local cloud's hosts (boot.log) and kubenode's components
// (node/logs) use it; neither can pipe its children's output through itself, since the
// children outlive it (an adopted host) or must not stall when it is slow.
package logcap
