package recall

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
)

// NormalizeGoal returns goal lowercased, with every run of whitespace folded
// to one space and no leading or trailing space. Invalid UTF-8 is dropped.
func NormalizeGoal(goal string) string {
	return strings.Join(strings.Fields(strings.ToLower(strings.ToValidUTF8(goal, ""))), " ")
}

// GoalKey returns the dedupe key of a solution stored through the memory
// API: "goal:" and 16 hex digits of the SHA-256 of NormalizeGoal(goal).
// Goals that differ only in case or spacing share a key.
func GoalKey(goal string) string {
	sum := sha256.Sum256([]byte(NormalizeGoal(goal)))
	return "goal:" + hex.EncodeToString(sum[:8])
}

// ConversationKey returns the dedupe key of an auto-captured solution:
// "conv:" and 16 hex digits of the SHA-256 of the conversation's first
// messages, each framed by its length so that no two lists collide. Pass
// the messages as the client sent them (recall and guard blocks stripped),
// so that every turn of one conversation yields the same key.
func ConversationKey(firstMessages ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, m := range firstMessages {
		binary.BigEndian.PutUint64(n[:], uint64(len(m)))
		h.Write(n[:])
		h.Write([]byte(m))
	}
	return "conv:" + hex.EncodeToString(h.Sum(nil)[:8])
}
