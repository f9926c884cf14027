//go:build !linux

package main

import "os/exec"

// setDeathSignal does nothing outside Linux: children are stopped by
// scarbench on its way out.
func setDeathSignal(*exec.Cmd) {}
