//go:build !linux

package eventlog

import "testing"

func isExt4(string) bool  { return false }
func isTmpfs(string) bool { return false }

func ext4FallsBack(*testing.T, string) bool { return false }
