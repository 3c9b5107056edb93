//go:build unix && !linux

package multilang

import "syscall"

// sysProcAttr puts the program in its own process group (a Ctrl-C or SIGTERM to
// gale's group does not reach it: gale stops it after the drain). There is no
// parent-death signal outside Linux: a program outlives a gale killed with SIGKILL
// until it reads its closed stdin.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// exitedNoReap would learn of the exit without reaping; without waitid's WNOWAIT
// here its channel never closes, and the pipes' end is waited for instead.
func exitedNoReap(pid int) <-chan struct{} { return nil }
