package wire

import (
	"strconv"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/recall"
)

// TestRunKey: a run's key is the hash of the conversation's key and the
// run, the same whether it was remembered or not; the memo of them is
// bounded in entries, and a long run id is not kept.
func TestRunKey(t *testing.T) {
	if RunKey("", "r") != "" || RunKey("conv:a", "") != "conv:a" {
		t.Fatal("a key without a run, or a run without a key, is the key")
	}
	for range 2 { // made, then remembered
		for i := range 3 * maxRunKeys {
			key, run := "conv:"+strconv.Itoa(i%7), "run-"+strconv.Itoa(i)
			if got, want := RunKey(key, run), recall.ConversationKey(key, run); got != want {
				t.Fatalf("RunKey(%q, %q) = %q, want %q", key, run, got, want)
			}
		}
	}
	runKeys.mu.Lock()
	n := len(runKeys.cur) + len(runKeys.prev)
	last := 3*maxRunKeys - 1
	_, kept := runKeys.cur[[2]string{"conv:" + strconv.Itoa(last%7), "run-" + strconv.Itoa(last)}]
	runKeys.mu.Unlock()
	if n > 2*maxRunKeys || !kept {
		t.Fatalf("%d run keys held (at most %d), the newest kept: %v", n, 2*maxRunKeys, kept)
	}
	long := strings.Repeat("r", maxRunKeyBytes)
	if got, want := RunKey("conv:x", long), recall.ConversationKey("conv:x", long); got != want {
		t.Fatalf("long run: %q, want %q", got, want)
	}
	runKeys.mu.Lock()
	_, kept = runKeys.cur[[2]string{"conv:x", long}]
	runKeys.mu.Unlock()
	if kept {
		t.Fatal("a long run id was kept")
	}
}
