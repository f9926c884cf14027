package recall

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
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
	writeFramed(h, firstMessages)
	return "conv:" + hex.EncodeToString(h.Sum(nil)[:8])
}

// writeFramed writes each message to h framed by its length.
func writeFramed(h hash.Hash, messages []string) {
	var n [8]byte
	for _, m := range messages {
		binary.BigEndian.PutUint64(n[:], uint64(len(m)))
		h.Write(n[:])
		h.Write([]byte(m))
	}
}

// A KeyStart is ConversationKey begun with a conversation's first message
// (its system text, tens of KB for an agent), to be ended with each task's
// messages: the first message is hashed once, not on every request. Its
// zero value is not ready: make one with StartKey. It is safe for
// concurrent use.
type KeyStart struct {
	first string
	h     hash.Hash
}

// StartKey begins ConversationKey with first.
func StartKey(first string) KeyStart {
	h := sha256.New()
	writeFramed(h, []string{first})
	return KeyStart{first: first, h: h}
}

// Key returns ConversationKey(first, rest...), first being the message k
// began with.
func (k KeyStart) Key(rest ...string) string {
	c, ok := k.h.(hash.Cloner)
	if !ok {
		return ConversationKey(append([]string{k.first}, rest...)...)
	}
	h, err := c.Clone()
	if err != nil {
		return ConversationKey(append([]string{k.first}, rest...)...)
	}
	d := h.(hash.Hash)
	writeFramed(d, rest)
	return "conv:" + hex.EncodeToString(d.Sum(nil)[:8])
}
