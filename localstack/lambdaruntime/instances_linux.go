package lambdaruntime

import (
	"os/exec"
	"syscall"
)

// configure makes the instance die with the process that started it.
func configure(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
