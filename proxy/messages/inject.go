package messages

import (
	"bytes"
	"strings"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// billingHeader opens the text block Claude Code sends first in system.
const billingHeader = "x-anthropic-billing-header:"

// Info implements [wire.Request].
func (r *request) Info() *wire.Info { return &r.info }

// Forwarded implements [wire.Request]: nothing refers to the body.
func (r *request) Forwarded(bool) {}

// Inject implements [wire.Request]: the blocks go in front of the
// top-level system text, which is created when absent.
func (r *request) Inject(dst, body []byte, p wire.Placement) ([]byte, error) {
	blocks := p.Blocks()
	if out, done := wire.InjectMember(dst, body, r.system, "system", blocks); done {
		return out, nil
	}
	if raw := r.system.Raw(body); raw[0] == '[' {
		arr, changed, err := rewriteBlocks(gjson.ParseBytes(raw), blocks)
		if err != nil || !changed {
			return body, err
		}
		return wire.Splice(body, r.system.Start, r.system.End, arr), nil
	}
	// A system value the API does not define: leave the request as the
	// client sent it rather than replace the prompt.
	return body, nil
}

// rewriteBlocks handles a system given as an array of content blocks: the
// new blocks become a text block of their own, first (after a leading
// billing header, which Claude Code sends as a text block of its own and
// which is no instruction to the model); earlier blocks are
// stripped from every text block. A text block that held only earlier
// blocks is dropped; its cache_control, if it had one, moves to the new
// text block, so the request keeps its cache breakpoints (never more).
// Every other block keeps its bytes. It returns the new array and whether
// it changed.
func rewriteBlocks(arr gjson.Result, blocks []wire.Block) ([]byte, bool, error) {
	changed := !wire.Empty(blocks)
	var lead, kept [][]byte
	var moved []byte // cache_control of a dropped block
	var err error
	arr.ForEach(func(_, b gjson.Result) bool {
		raw := []byte(b.Raw)
		if len(kept) == 0 && len(lead) == 0 && strings.HasPrefix(b.Get("text").String(), billingHeader) {
			lead = append(lead, raw)
			return true
		}
		if t := b.Get("text"); b.Get("type").String() == "text" && t.Type == gjson.String {
			if stripped := wire.Strip(t.Str); stripped != t.Str {
				changed = true
				stripped = string(bytes.TrimLeft([]byte(stripped), "\n"))
				if stripped == "" {
					if cc := b.Get("cache_control"); cc.Exists() && moved == nil {
						moved = []byte(cc.Raw)
					}
					return true
				}
				if raw, err = sjson.SetBytes(raw, "text", stripped); err != nil {
					return false
				}
			}
		}
		kept = append(kept, raw)
		return true
	})
	if err != nil || !changed {
		return nil, false, err
	}
	out := []byte{'['}
	if len(lead) > 0 {
		out = append(out, lead[0]...)
		out = append(out, ',')
	}
	if !wire.Empty(blocks) {
		out = append(out, `{"type":"text","text":"`...)
		out = wire.AppendBlocks(out, blocks)
		out = append(out, '"')
		if moved != nil {
			out = append(out, `,"cache_control":`...)
			out = append(out, moved...)
		}
		out = append(out, '}')
		if len(kept) > 0 {
			out = append(out, ',')
		}
	}
	out = append(out, bytes.Join(kept, []byte{','})...)
	out = bytes.TrimSuffix(out, []byte{','})
	return append(out, ']'), true, nil
}
