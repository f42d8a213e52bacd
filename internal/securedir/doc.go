// Package securedir decides whether a directory can be trusted by a process that will act
// on what it finds there as root: remove what a journal in it lists, unmount, delete
// routes, read credentials. A directory that another user can write, or that sits below
// one they can replace, lets them plant a symbolic link or a forged file and have root
// act on it. The rule is OpenSSH's for its key files, applied to every component of the
// path: each is owned by root or by the process's own user, and none is writable by
// group or others unless it has the sticky bit (as /tmp has), which keeps others from
// renaming or deleting what is not theirs.
package securedir
