package responses

import (
	"github.com/scarproxy/scarproxy/proxy/wire"
)

// Info implements [wire.Request].
func (r *request) Info() *wire.Info { return &r.info }

// Forwarded implements [wire.Request]: nothing refers to the body.
func (r *request) Forwarded(bool) {}

// Inject implements [wire.Request]: the blocks go in front of the
// instructions, which are created when absent. Instructions of a type the
// API does not define are left as the client sent them.
func (r *request) Inject(dst, body []byte, p wire.Placement) ([]byte, error) {
	out, _ := wire.InjectMember(dst, body, r.instructions, "instructions", p.Blocks())
	return out, nil
}
