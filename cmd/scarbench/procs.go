package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Environment of the child processes scarbench starts from its own binary.
const (
	envRole   = "SCARBENCH_ROLE"   // upstream | bareproxy
	envTarget = "SCARBENCH_TARGET" // bareproxy: the upstream's base URL
	envListen = "SCARBENCH_LISTEN" // the address a role listens on (default 127.0.0.1:0)
)

// child is a server process started by scarbench.
type child struct {
	name    string
	cmd     *exec.Cmd
	addr    string // host:port it listens on (loopback)
	logPath string // its stdout and stderr
	done    chan struct{}
}

var roleAddr = regexp.MustCompile(`^listening (\S+)$`)

// startChild starts path with args and waits until it prints its address
// (the first submatch of addrRe on a stdout line). The child is killed if
// scarbench dies (Linux), and must listen on a loopback address.
func startChild(ctx context.Context, name, path string, args, env []string, logPath string, addrRe *regexp.Regexp, timeout time.Duration) (*child, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Stderr = logf
	setDeathSignal(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s: start %s: %w", name, path, err)
	}
	c := &child{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		found := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if m := addrRe.FindStringSubmatch(line); !found && m != nil {
				found = true
				addrc <- m[1]
			}
		}
		io.Copy(logf, out)
	}()
	go func() {
		cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case c.addr = <-addrc:
	case <-c.done:
		return nil, fmt.Errorf("%s exited before listening: %s", name, c.logTail())
	case <-timer.C:
		c.stop()
		return nil, fmt.Errorf("%s did not listen within %s: %s", name, timeout, c.logTail())
	case <-ctx.Done():
		c.stop()
		return nil, ctx.Err()
	}
	if err := checkLoopback(c.addr); err != nil {
		c.stop()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// checkLoopback refuses any address that is not on the loopback interface.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("address %q is not a loopback address", addr)
	}
	return nil
}

// pid returns the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// stop asks the child to shut down (SIGTERM) and kills it after 10s.
func (c *child) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
}

// logTail returns the last lines of the child's output, for errors.
func (c *child) logTail() string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return "(no log)"
	}
	b = bytes.TrimSpace(b)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	if len(b) == 0 {
		return "(empty log)"
	}
	return string(b)
}

// childEnv is the environment of the children: scarbench's own, without
// SCARPROXY_* and SCARBENCH_* variables (scarproxy runs with its default
// configuration plus the benchmark's config file), plus extra.
func childEnv(environ []string, extra ...string) []string {
	var out []string
	for _, kv := range environ {
		if strings.HasPrefix(kv, "SCARPROXY_") || strings.HasPrefix(kv, "SCARBENCH_") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

// buildScarproxy builds the scarproxy command into dir with the go tool
// (the working directory must be inside the scarproxy module).
func buildScarproxy(ctx context.Context, dir string) (string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("build scarproxy: the go tool is not in PATH; pass -scarproxy PATH")
	}
	bin := filepath.Join(dir, "scarproxy")
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", bin, "github.com/scarproxy/scarproxy/cmd/scarproxy")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build scarproxy (run scarbench inside the scarproxy module, or pass -scarproxy PATH): %w: %s", err, bytes.TrimSpace(out))
	}
	return bin, nil
}

// clockTicks is the unit of /proc/PID/stat's CPU times (USER_HZ): 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procCPU returns the CPU time (user and system, of every thread, exited
// ones included) process pid has used, from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read the CPU time of pid %d: %w", pid, err)
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted are those after it (utime and stime are the 14th and 15th
	// of the line, the 12th and 13th after the name).
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("read the CPU time of pid %d: unexpected /proc/%d/stat", pid, pid)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read the CPU time of pid %d: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// procStatus reads one "kB" field (VmRSS, VmHWM) of /proc/PID/status, in bytes.
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("read %s of pid %d: %w", field, pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			break
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("read %s of pid %d: no such field", field, pid)
}
