package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cutOffBound bounds how long a test waits for the server to close a slow
// client's connection; it asserts no duration (the configured deadlines
// are a fraction of it).
const cutOffBound = 20 * time.Second

// startWithServerConfig runs serve --mock with the given server: section.
func startWithServerConfig(t *testing.T, server string) *instance {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("mock: true\ndata_dir: "+dir+"\nserver:\n"+server), 0o644)
	return start(t, "--config", cfg)
}

// sendAndWaitForClose opens a connection, writes what a slow client gets
// out, sends nothing more, and reports whether the server closed the
// connection (after an answer or without one) within cutOffBound.
func sendAndWaitForClose(t *testing.T, in *instance, sent string) (answer string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(in.BaseURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, sent); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(cutOffBound))
	b, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the slow client's connection open (read %q)", b)
	}
	return string(b)
}

// TestSlowClientsAreCutOff: a client that stops in the middle of its
// headers, or of its body, is cut off by the configured deadlines: between
// two reads of the body (idle), and for the body as a whole (total).
func TestSlowClientsAreCutOff(t *testing.T) {
	const headers = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
	t.Run("headers", func(t *testing.T) {
		in := startWithServerConfig(t, "  read_header_timeout: 100ms\n")
		sendAndWaitForClose(t, in, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Ty")
	})
	t.Run("body idle", func(t *testing.T) {
		in := startWithServerConfig(t, "  read_body_idle_timeout: 100ms\n  read_body_timeout: 1h\n")
		sendAndWaitForClose(t, in, headers+`{"model":`)
	})
	t.Run("body total", func(t *testing.T) {
		in := startWithServerConfig(t, "  read_body_idle_timeout: 1h\n  read_body_timeout: 100ms\n")
		sendAndWaitForClose(t, in, headers+`{"model":`)
	})
	t.Run("body never read", func(t *testing.T) {
		// A 404 answers without reading the body; net/http then reads on
		// to reuse the connection, and that is bounded too.
		in := startWithServerConfig(t, "  read_body_idle_timeout: 100ms\n  read_body_timeout: 1h\n")
		got := sendAndWaitForClose(t, in, strings.Replace(headers, "/v1/chat/completions", "/nowhere", 1)+`{"model":`)
		if !strings.HasPrefix(got, "HTTP/1.1 404") {
			t.Fatalf("answer %q", got)
		}
	})
}

// TestBodyDeadlinesSpareTheAnswer: the body deadlines end with the body: a
// streamed answer that lasts longer than them is not cut.
func TestBodyDeadlinesSpareTheAnswer(t *testing.T) {
	in := startWithServerConfig(t, "  read_body_idle_timeout: 50ms\n  read_body_timeout: 50ms\n")
	ctx, cancel := context.WithTimeout(context.Background(), cutOffBound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, in.BaseURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"mock-gpt","stream":true,"messages":[{"role":"user","content":"[[mock:delay=300ms]] hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var last string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if sc.Text() != "" {
			last = sc.Text()
		}
	}
	if res.StatusCode != 200 || sc.Err() != nil || last != "data: [DONE]" {
		t.Fatalf("status %d, last line %q, err %v", res.StatusCode, last, sc.Err())
	}
}

// TestServerSection: the server: keys come from YAML, then SCARPROXY_SERVER_*
// variables, and a bad value stops start-up naming the key.
func TestServerSection(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	os.WriteFile(path, []byte("mock: true\nserver:\n  read_header_timeout: 3s\n  read_body_timeout: 1m\n"), 0o644)
	fs, f := newServeFlags()
	if err := fs.Parse([]string{"--config", path}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"SCARPROXY_SERVER_READ_BODY_TIMEOUT": "2m", "SCARPROXY_SERVER_READ_BODY_IDLE_TIMEOUT": "7s",
		"SCARPROXY_SERVER_MAX_BODY_BYTES_IN_FLIGHT": "1073741824",
	}
	cfg, err := f.load(fs, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := ServerConfig{ReadHeaderTimeout: 3 * time.Second, ReadBodyTimeout: 2 * time.Minute, ReadBodyIdleTimeout: 7 * time.Second, MaxBodyBytesInFlight: 1 << 30}
	if cfg.Server != want {
		t.Fatalf("server: %+v, want %+v", cfg.Server, want)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"server:\n  read_body_idle_timeout: 0s\n", "server.read_body_idle_timeout"},
		{"server:\n  read_header_timeout: -1s\n", "server.read_header_timeout"},
		{"max_body_bytes: 1000\nserver:\n  max_body_bytes_in_flight: 999\n", "server.max_body_bytes_in_flight"},
	} {
		os.WriteFile(path, []byte("mock: true\n"+tc.yaml), 0o644)
		err := run(context.Background(), []string{"serve", "--config", path, "--listen", "127.0.0.1:0", "--data", dir}, noEnv, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want it to name %s", tc.yaml, err, tc.want)
		}
	}
	if _, err := f.load(fs, func(k string) string {
		return map[string]string{"SCARPROXY_SERVER_READ_HEADER_TIMEOUT": "soon"}[k]
	}); err == nil || !strings.Contains(err.Error(), "SCARPROXY_SERVER_READ_HEADER_TIMEOUT") {
		t.Errorf("a bad duration in the env: err = %v", err)
	}
}
