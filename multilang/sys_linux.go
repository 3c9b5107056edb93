package multilang

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts the program in its own process group (a Ctrl-C or SIGTERM to
// gale's group does not reach it: gale stops it after the drain) and has the kernel
// kill it if gale's process dies (the parent-death signal; Linux only).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// exitedNoReap returns a channel closed once the process pid has exited, learnt
// without reaping it (so exec.Cmd.Wait still can). It holds an OS thread in waitid
// while the program runs.
func exitedNoReap(pid int) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				return
			}
		}
	}()
	return ch
}
