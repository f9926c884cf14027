package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// prefix is what every request of a conversation sends before its task:
// the system prompt and the tools (-prefix). The zero prefix is
// scarbench's own: systemPrompt and benchTools.
type prefix struct {
	// system is scarbench's own system prompt, systemOf's padding
	// included ("": systemPrompt); not read when agent is set.
	system string
	// agent, when set, is a real agent's system prompt and tools.
	agent *agentPrefix
}

// agentPrefix is the system prompt and the tools of a request a real agent
// sent, as they were, in its API's JSON.
type agentPrefix struct {
	file string // the capture, below the module's root
	// system is the system prompt in the API's shape: chat, the system
	// message's content; responses, the developer items Codex CLI sends
	// before the task (a JSON array of items); messages, the system
	// array; gemini, the systemInstruction content.
	system json.RawMessage
	tools  json.RawMessage // the tools array
	// metadata are the members of the client_metadata object Codex CLI
	// sends after its tools ("key":value each): it orders them anew on
	// every request (a hash map), so scarbench does too. Nil for the
	// other APIs.
	metadata [][]byte
}

// agentCaptures are the captures the agent prefix of each API comes from:
// the first request of a run of the agent most people use that API with.
var agentCaptures = map[string]string{
	"chat":      "proxy/chat/testdata/agents/qwen-turn1.json",
	"responses": "proxy/responses/testdata/agents/codex-gpt-5.5-turn2.json",
	"messages":  "proxy/messages/testdata/agents/claude-turn1.json",
	"gemini":    "proxy/gemini/testdata/agents/gemini-cli-turn1.json",
}

// prefixOf returns the prefix of -prefix: scarbench's own, with its system
// prompt padded to about systemKB, or the agent prefix of api read from
// the module found at or above dir.
func prefixOf(kind, api string, systemKB int, dir string) (prefix, error) {
	if kind == "synthetic" {
		return prefix{system: systemOf(systemKB << 10)}, nil
	}
	root, err := moduleRoot(dir)
	if err != nil {
		return prefix{}, err
	}
	body, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(agentCaptures[api])))
	if err != nil {
		return prefix{}, fmt.Errorf("scarbench: the agent prefix: %w", err)
	}
	ap, err := readAgentPrefix(api, body)
	if err != nil {
		return prefix{}, fmt.Errorf("scarbench: the agent prefix of %s: %w", agentCaptures[api], err)
	}
	ap.file = agentCaptures[api]
	return prefix{agent: ap}, nil
}

// readAgentPrefix takes the system prompt and the tools out of a captured
// request of api, byte for byte.
func readAgentPrefix(api string, body []byte) (*agentPrefix, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	ap := &agentPrefix{tools: top["tools"]}
	switch api {
	case "chat":
		var msgs []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(top["messages"], &msgs); err != nil {
			return nil, err
		}
		if len(msgs) > 0 && msgs[0].Role == "system" {
			ap.system = msgs[0].Content
		}
	case "responses":
		var items []json.RawMessage
		if err := json.Unmarshal(top["input"], &items); err != nil {
			return nil, err
		}
		var dev [][]byte
		for _, it := range items {
			var head struct{ Role string }
			if json.Unmarshal(it, &head) == nil && head.Role == "developer" {
				dev = append(dev, it)
			}
		}
		if len(dev) > 0 {
			ap.system = append(append([]byte{'['}, bytes.Join(dev, []byte{','})...), ']')
		}
		if raw := top["client_metadata"]; len(raw) > 0 {
			var meta map[string]json.RawMessage
			if err := json.Unmarshal(raw, &meta); err != nil {
				return nil, err
			}
			for _, k := range slices.Sorted(maps.Keys(meta)) {
				key, _ := json.Marshal(k)
				ap.metadata = append(ap.metadata, append(append(key, ':'), meta[k]...))
			}
		}
	case "messages":
		ap.system = top["system"]
	case "gemini":
		ap.system = top["systemInstruction"]
	}
	if len(ap.system) == 0 || len(ap.tools) == 0 {
		return nil, errors.New("no system prompt or no tools")
	}
	return ap, nil
}

// moduleRoot is the directory at or above dir whose go.mod is scarproxy's.
func moduleRoot(dir string) (string, error) {
	for d := dir; ; {
		if f, err := os.Open(filepath.Join(d, "go.mod")); err == nil {
			line, _ := bufio.NewReader(f).ReadString('\n')
			f.Close()
			if strings.TrimSpace(line) == "module github.com/scarproxy/scarproxy" {
				return d, nil
			}
		}
		up := filepath.Dir(d)
		if up == d {
			return "", fmt.Errorf("scarbench: the agent prefix is read from the agents' captures in scarproxy's source (proxy/*/testdata/agents): run scarbench inside it, or give -prefix synthetic")
		}
		d = up
	}
}

// marshal encodes a request body of a conversation with this prefix.
// Scarbench's own conversations are encoded as encoding/json does; an
// agent's are not HTML-escaped, as the agents (JavaScript's
// JSON.stringify, Rust's serde_json) send them, so that the prefix's
// bytes go out as the agent sent them.
func (pre prefix) marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(pre.agent == nil)
	if err := enc.Encode(v); err != nil {
		panic(err) // static data
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}
