package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/internal/agenttest"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
)

// prefixSlack is how many bytes of the previous turn's newest message the
// proxy's placement may cost past what a bare proxy keeps: the JSON that
// closes that message (a quote, a bracket, a brace), where the blocks of
// the turn went in.
const prefixSlack = 8

// TestPlacementKeepsTheCachedPrefix sends a looping conversation of every
// API through the proxy, turn by turn, with memory that recalls its task
// (and a solution stored mid-way), and compares the bodies the provider
// received: with guard.placement: turn, each turn shares with the one
// before it everything a bare proxy would share (the bytes before the
// newest turn, plus the recall block, the same on every turn), while the
// guard arrives from the second failure and the STOP block from the
// fourth. With guard.placement: system the same conversation loses its
// prefix at the system text: the test tells the two apart.
func TestPlacementKeepsTheCachedPrefix(t *testing.T) {
	for _, placement := range []string{guard.PlacementTurn, guard.PlacementSystem} {
		for _, f := range wireFormats {
			t.Run(placement+"/"+f.name, func(t *testing.T) {
				up := newRecorder(t, answerByPath)
				h := newHarness(t, "", withProviders(allAPIs(up.srv.URL)), withOptions(func(o *Options) {
					cfg := guard.DefaultConfig()
					cfg.Placement = placement
					g, err := guard.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					o.Guard = g
				}))
				ws := "ws-" + f.name
				solution := func(goal string) {
					t.Helper()
					status, b := h.apiCall(http.MethodPost, "/scar/v1/solutions", `{"workspace":"`+ws+`","goal":"`+goal+`","approach":"python3 -m py_compile first","outcome":"ran","confidence":0.9}`, nil)
					if status != http.StatusCreated {
						t.Fatalf("store a solution: %d %s", status, b)
					}
				}
				solution("Write hello.py and run it")
				var sent, received [][]byte
				var recallFrame []byte
				for n := 0; n <= 7; n++ {
					if n == 3 {
						solution("Write hello.py and run it with python3") // stored mid-conversation
					}
					body := []byte(f.turn(n))
					res := h.do(http.MethodPost, f.path, body, map[string]string{tenant.HeaderWorkspace: ws})
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					h.inflight.Wait()
					if res.StatusCode != http.StatusOK {
						t.Fatalf("turn %d: status %d", n, res.StatusCode)
					}
					got := up.last(t).Body
					sent, received = append(sent, body), append(received, got)

					if g := res.Header.Get(HeaderGuard); (n >= 2) != (g == "1") || (n >= 2) != strings.Contains(string(got), guard.BlockStart) {
						t.Fatalf("turn %d: X-Scar-Guard %s; the guard block reached the provider: %v", n, g, strings.Contains(string(got), guard.BlockStart))
					}
					if stop := res.Header.Get(HeaderLoop) == "stop"; (n >= 4) != stop || (n >= 4) != strings.Contains(string(got), guard.StopStart) {
						t.Fatalf("turn %d: X-Scar-Loop %q; the STOP block reached the provider: %v", n, res.Header.Get(HeaderLoop), strings.Contains(string(got), guard.StopStart))
					}
					if res.Header.Get(HeaderRecall) != "1" || bytes.Count(got, []byte(recall.BlockStart)) != 1 {
						t.Fatalf("turn %d: X-Scar-Recall %s, %d recall blocks", n, res.Header.Get(HeaderRecall), bytes.Count(got, []byte(recall.BlockStart)))
					}
					if placement == guard.PlacementSystem {
						continue
					}
					// The recall block is in the first user turn, framed,
					// and the same on every turn; the solution stored
					// mid-way changes nothing.
					frame := recallFrameOf(t, got)
					if recallFrame == nil {
						recallFrame = frame
					} else if !bytes.Equal(frame, recallFrame) {
						t.Fatalf("turn %d: the recall block changed:\n%s\nwas\n%s", n, frame, recallFrame)
					}
				}
				lost := 0 // turns whose cached prefix a bare proxy would keep and this one lost
				for n := 1; n < len(received); n++ {
					bare := agenttest.CommonPrefix(sent[n], sent[n-1])
					through := agenttest.CommonPrefix(received[n], received[n-1])
					if through+prefixSlack < bare {
						lost++
						if placement == guard.PlacementTurn {
							t.Errorf("turn %d: the provider's cached prefix ends at byte %d of the previous turn's %d; a bare proxy keeps %d of %d",
								n, through, len(received[n-1]), bare, len(sent[n-1]))
						}
					}
				}
				t.Logf("%s placement, %s: %d of %d turns kept the previous turn's cached prefix", placement, f.name, len(received)-1-lost, len(received)-1)
				if placement == guard.PlacementSystem && lost < 4 {
					t.Fatalf("with the blocks in the system text only %d of 7 turns lost their cached prefix: the check does not see a broken cache", lost)
				}
			})
		}
	}
}

// recallFrameOf returns the frame holding the recall block in a body as
// the provider received it, as JSON-escaped bytes.
func recallFrameOf(t *testing.T, body []byte) []byte {
	t.Helper()
	i := bytes.Index(body, []byte(recall.BlockStart))
	if i < 0 {
		t.Fatal("no recall block")
	}
	start := bytes.LastIndex(body[:i], []byte(wire.FrameStart))
	end := bytes.Index(body[i:], []byte(wire.FrameEnd))
	if start < 0 || end < 0 {
		t.Fatalf("the recall block is not framed: %.300s", body[max(0, i-200):])
	}
	return body[start : i+end+len(wire.FrameEnd)]
}
