package main

import "golang.org/x/sys/unix"

// eventlogOnExt4 says whether dir is on ext4 (or ext2/ext3, which share its magic
// number), where the log's mark rides the WAL's flush.
func eventlogOnExt4(dir string) bool {
	var fs unix.Statfs_t
	return unix.Statfs(dir, &fs) == nil && fs.Type == 0xEF53
}
