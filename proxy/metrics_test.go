package proxy

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

func TestMetricsCountWhatHappened(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	h.chat(agentTurns(t, 2, nil), nil) // two tool errors, one guard
	h.chat(agentTurns(t, 2, nil), nil)
	res := h.do(http.MethodGet, "/metrics", nil, nil)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	body := string(b)
	// The tool errors were classified once and kept.
	classified := 0.0
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, `scarproxy_cache_bytes{cache="classifications"} `); ok {
			classified, _ = strconv.ParseFloat(v, 64)
		}
	}
	if classified <= 0 {
		t.Errorf("the classifications' bytes are %v", classified)
	}
	for _, want := range []string{
		`scarproxy_requests_total{provider="up",route="chat",status="200"} 2`,
		`scarproxy_incidents_total{pattern="SYNTAX COMPLIANCE ERROR",type="tool_error"} 2`,
		`scarproxy_blocks_injected_total{block="guard"} 2`,
		`scarproxy_overhead_seconds_count 2`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}

// TestMetricsSayWhatTheMemosHold: the bytes each format's conversation
// memo holds are exported, and a conversation's turn is counted there.
func TestMetricsSayWhatTheMemosHold(t *testing.T) {
	up := newRecorder(t, answerByPath)
	h := newHarness(t, "", withProviders(allAPIs(up.srv.URL)))
	body := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"ok"},{"role":"user","content":"more"}]}`
	res := h.do(http.MethodPost, "/v1/messages", []byte(body), nil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	chat := `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"ok"},{"role":"user","content":"more"}]}`
	res = h.do(http.MethodPost, "/v1/chat/completions", []byte(chat), nil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	gemini := `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"ok"}]},{"role":"user","parts":[{"text":"more"}]}]}`
	res = h.do(http.MethodPost, "/v1beta/models/m:generateContent", []byte(gemini), nil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	h.inflight.Wait()
	res = h.do(http.MethodGet, "/metrics", nil, nil)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	held := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		for _, f := range []string{"chat", "messages", "responses", "gemini"} {
			if v, ok := strings.CutPrefix(line, `scarproxy_conversation_memo_bytes{format="`+f+`"} `); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				held[f] = n
			}
		}
	}
	if len(held) != 4 || held["chat"] <= 0 || held["messages"] <= 0 || held["gemini"] <= 0 || held["responses"] != 0 {
		t.Fatalf("memo bytes %v\n%s", held, b)
	}
}
