package responses

import (
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

// Info implements [wire.Request].
func (r *request) Info() *wire.Info { return &r.info }

// Forwarded implements [wire.Request]: nothing refers to the body.
func (r *request) Forwarded(bool) {}

// Inject implements [wire.Request]: the blocks go in front of the
// instructions, which are created when absent.
func (r *request) Inject(dst, body []byte, blocks ...wire.Block) ([]byte, error) {
	sp := r.instructions
	if !sp.OK() {
		return wire.InsertMember(body, "instructions", blocks), nil
	}
	raw := sp.Raw(body)
	switch raw[0] {
	case '"':
		return wire.InjectString(dst, body, sp, gjson.ParseBytes(raw).Str, blocks), nil
	case 'n': // null
		if wire.Empty(blocks) {
			return body, nil
		}
		val := wire.AppendBlocks([]byte{'"'}, blocks)
		return wire.Splice(body, sp.Start, sp.End, append(val, '"')), nil
	}
	// Instructions the API does not define: leave the request as the
	// client sent it.
	return body, nil
}
