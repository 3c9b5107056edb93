//go:build !linux

package eventlog

func isExt4(string) bool  { return false }
func isTmpfs(string) bool { return false }
