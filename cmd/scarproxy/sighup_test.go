//go:build unix

package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGHUPReloadsServe sends SIGHUP to a serve process: it takes the
// rewritten configuration (a gateway key) and says so; a configuration
// that does not validate is refused with an ERROR line, and serve goes
// on with the one it has.
func TestSIGHUPReloadsServe(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("mock: true\n"), 0o644)
	cmd := exec.Command(os.Args[0], "serve", "--config", cfg, "--data", dir, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "SCARPROXY_TEST_MAIN=1", "TEAM_KEY=team-secret")
	// Pipes of our own: Wait closes those of StdoutPipe under readers.
	stdout, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
		}
	}()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	first, err := bufio.NewReader(stdout).ReadString('\n')
	go io.Copy(io.Discard, stdout)
	go func() { waitErr = cmd.Wait(); close(exited) }()
	if err != nil || !strings.Contains(first, "listening on ") {
		t.Fatalf("serve did not start: %q %v", first, err)
	}
	base := strings.TrimSuffix(strings.Fields(first[strings.Index(first, "listening on ")+len("listening on "):])[0], "/v1")
	chat := `{"model":"mock-gpt","messages":[{"role":"user","content":"hi"}]}`
	if r := do(t, "POST", base+"/v1/chat/completions", chat, nil); r.status != 200 {
		t.Fatalf("before: %d %s", r.status, r.body)
	}
	// waitLine waits for serve's next log line containing want.
	waitLine := func(want string) string {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("serve exited before logging %q", want)
				}
				if strings.Contains(l, want) {
					return l
				}
			case <-deadline:
				t.Fatalf("serve did not log %q", want)
			}
		}
	}

	os.WriteFile(cfg, []byte("mock: true\ngateway:\n  keys:\n    - key_env: TEAM_KEY\n      workspace: team\n"), 0o644)
	cmd.Process.Signal(syscall.SIGHUP)
	waitLine("configuration reloaded")
	if r := do(t, "POST", base+"/v1/chat/completions", chat, nil); r.status != 401 {
		t.Fatalf("after the reload, without the key: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", base+"/v1/chat/completions", chat, map[string]string{"Authorization": "Bearer team-secret"}); r.status != 200 {
		t.Fatalf("after the reload, with the key: %d %s", r.status, r.body)
	}

	os.WriteFile(cfg, []byte("mock: true\nguard:\n  window: soon\n"), 0o644)
	cmd.Process.Signal(syscall.SIGHUP)
	if l := waitLine("reload refused"); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "window") {
		t.Fatalf("refused reload logged as %q", l)
	}
	if r := do(t, "POST", base+"/v1/chat/completions", chat, nil); r.status != 401 {
		t.Fatalf("after a refused reload, the key is still required: %d %s", r.status, r.body)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("serve exited with %v", waitErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
}
