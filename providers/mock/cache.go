package mock

import (
	"cmp"
	"container/list"
	"crypto/sha256"
	"sync"

	"github.com/tidwall/gjson"
)

// Usage and the prompt cache: the mock counts tokens and cache hits as a
// provider would, so that what the proxy does to a cached prefix shows in
// the answers' usage (see the Transport type's doc, # Usage).

// tokens estimates the tokens of n bytes: a quarter, rounded up.
func tokens(n int) int { return (n + 3) / 4 }

// Bounds of the prefix memory: conversations, and the bytes of the
// requests it holds. Past either, the conversation used least recently
// is forgotten.
const (
	maxPrefixConversations = 4096
	maxPrefixBytes         = 64 << 20
)

// promptOf returns the parts of a request body a provider caches, the
// raw JSON at paths, in the order the provider reads them (which need not
// be the body's): the bytes the mock compares from one request to the
// next.
func promptOf(body []byte, paths ...string) []byte {
	var b []byte
	for _, v := range gjson.GetManyBytes(body, paths...) {
		b = append(b, v.Raw...)
		b = append(b, '\n')
	}
	return b
}

// conversationKey names a conversation: its model and the text of its
// first user message, without the blocks the proxy may have placed there.
func conversationKey(model, first string) [32]byte {
	h := sha256.New()
	h.Write([]byte(model))
	h.Write([]byte{0})
	h.Write([]byte(withoutBlocks(first)))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// prefixMemory holds, for each conversation, the body of the last request
// the mock answered in it. Its zero value is empty and ready, with the
// bounds above; it is safe for concurrent use.
type prefixMemory struct {
	// maxConversations and maxBytes replace the bounds when not zero (tests).
	maxConversations, maxBytes int

	mu    sync.Mutex
	convs map[[32]byte]*list.Element // of *remembered
	order list.List                  // front: used last
	bytes int
}

type remembered struct {
	key    [32]byte
	prompt []byte
}

// share remembers prompt as the last request of conversation key and
// returns how many of its leading bytes it shares with the one before
// (0 for a conversation's first request). prompt must not change after.
func (p *prefixMemory) share(key [32]byte, prompt []byte) int {
	p.mu.Lock()
	var prev []byte
	if e, ok := p.convs[key]; ok {
		r := e.Value.(*remembered)
		prev = r.prompt
		p.forget(e)
	}
	maxConvs, maxBytes := cmp.Or(p.maxConversations, maxPrefixConversations), cmp.Or(p.maxBytes, maxPrefixBytes)
	if len(prompt) <= maxBytes {
		if p.convs == nil {
			p.convs = make(map[[32]byte]*list.Element)
		}
		p.convs[key] = p.order.PushFront(&remembered{key, prompt})
		p.bytes += len(prompt)
		for len(p.convs) > maxConvs || p.bytes > maxBytes {
			p.forget(p.order.Back())
		}
	}
	p.mu.Unlock()
	return commonPrefix(prev, prompt)
}

func (p *prefixMemory) forget(e *list.Element) {
	r := p.order.Remove(e).(*remembered)
	delete(p.convs, r.key)
	p.bytes -= len(r.prompt)
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// openAICached is the cached_tokens OpenAI reports for a cached prefix of
// prefixTokens: none below 1024 tokens, then whole blocks of 128.
func openAICached(prefixTokens int) int {
	const first, block = 1024, 128
	if prefixTokens < first {
		return 0
	}
	return prefixTokens - (prefixTokens-first)%block
}

// anthropicSplit splits the input tokens of a Messages request as
// Anthropic reports them: read from the cache (the prefix of its prompt
// shared with the conversation's previous request), written to it (the
// rest of the prompt up to the end of the last block marked with
// cache_control, or all of it with a top-level cache_control; none
// without a mark), and the input besides.
func anthropicSplit(body, prompt []byte, prefix int) (input, read, creation int) {
	total, read := tokens(len(body)), tokens(prefix)
	mark := lastCacheMark(prompt)
	if gjson.GetBytes(body, "cache_control").IsObject() {
		mark = len(prompt)
	}
	if mark > 0 {
		creation = max(0, tokens(mark)-read)
	}
	return total - read - creation, read, creation
}

// lastCacheMark returns the offset just after the JSON object of prompt
// that holds the last "cache_control" member to close, or 0 when none
// does. prompt is JSON values, one after the other.
func lastCacheMark(prompt []byte) int {
	var marked []bool // per open object: it holds cache_control
	mark := 0
	for i := 0; i < len(prompt); i++ {
		switch prompt[i] {
		case '{':
			marked = append(marked, false)
		case '}':
			if n := len(marked); n > 0 {
				if marked[n-1] {
					mark = i + 1
				}
				marked = marked[:n-1]
			}
		case '"':
			end := i + 1
			for end < len(prompt) && prompt[end] != '"' {
				if prompt[end] == '\\' {
					end++
				}
				end++
			}
			if n := len(marked); n > 0 && end < len(prompt) && string(prompt[i+1:end]) == "cache_control" && isKey(prompt[end+1:]) {
				marked[n-1] = true
			}
			i = end
		}
	}
	return mark
}

// isKey reports whether rest, what follows a JSON string, makes it a key.
func isKey(rest []byte) bool {
	for _, c := range rest {
		switch c {
		case ' ', '\t', '\r', '\n':
		case ':':
			return true
		default:
			return false
		}
	}
	return false
}
