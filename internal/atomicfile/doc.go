// Package atomicfile writes files whole: under a temporary name in the target's
// directory, synced to disk, renamed over the target, and the directory synced. A reader
// sees the old file or the new one, never part of one, and a crash (of the process or
// the machine) leaves one of them: without the syncs, a rename can reach the disk before
// the data it names, and a file that was renamed into place comes back empty.
//
// The local cloud's host journal, kubenode's configuration and status files, the image
// archives of package images and the local cloud's address file are written with it.
package atomicfile
