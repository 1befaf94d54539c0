package main

import "os/exec"

func execCommand(path string) *exec.Cmd { return exec.Command(path) }
