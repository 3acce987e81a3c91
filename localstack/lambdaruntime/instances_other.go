//go:build !linux

package lambdaruntime

import "os/exec"

// configure has nothing to set outside Linux.
func configure(*exec.Cmd) {}
