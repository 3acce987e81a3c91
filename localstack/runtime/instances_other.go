//go:build !linux

package runtime

import "os/exec"

// configure has nothing to set outside Linux.
func configure(*exec.Cmd) {}
