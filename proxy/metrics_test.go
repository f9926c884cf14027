package proxy

import (
	"io"
	"net/http"
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
