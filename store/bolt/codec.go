package bolt

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// Incidents are stored in bbolt in a compact hand encoding rather than JSON:
// ListIncidents decodes every record it returns on the hot path of each
// proxied request, and this form decodes with far less work than JSON
// (BENCHMARKS.md measures it).
//
// Layout, version 1:
//
//	byte    version (1)
//	string  ID, Workspace, Project, Session, Agent, Provider, Model, Type,
//	        Message, Fingerprint   (each: uvarint length, then the bytes)
//	varint  Time as Unix microseconds
//	varint  StatusCode
//
// Version 2 is version 1 (with version byte 2) followed by one more
// string, Code. An incident without a Code is written in version 1, so
// records written before Code existed and records without one are the
// same bytes, and both versions are read.

const (
	incidentCodecV1 = 1
	incidentCodecV2 = 2
)

// errCorrupt is returned when a stored record cannot be decoded.
var errCorrupt = errors.New("store: corrupt record")

// appendIncident appends the encoding of inc to b.
func appendIncident(b []byte, inc *store.Incident) []byte {
	version := byte(incidentCodecV1)
	if inc.Code != "" {
		version = incidentCodecV2
	}
	b = append(b, version)
	for _, s := range [...]string{inc.ID, inc.Workspace, inc.Project, inc.Session, inc.Agent,
		inc.Provider, inc.Model, inc.Type, inc.Message, inc.Fingerprint} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendVarint(b, inc.Time.UnixMicro())
	b = binary.AppendVarint(b, int64(inc.StatusCode))
	if version == incidentCodecV2 {
		b = binary.AppendUvarint(b, uint64(len(inc.Code)))
		b = append(b, inc.Code...)
	}
	return b
}

// decodeIncident decodes a record made by appendIncident. It returns
// errCorrupt, never panics, on malformed input. The strings of inc share
// one allocation: a copy of b.
func decodeIncident(b []byte, inc *store.Incident) error {
	if len(b) == 0 || b[0] != incidentCodecV1 && b[0] != incidentCodecV2 {
		return errCorrupt
	}
	d := decoder{b: b, s: string(b), off: 1}
	for _, p := range [...]*string{&inc.ID, &inc.Workspace, &inc.Project, &inc.Session, &inc.Agent,
		&inc.Provider, &inc.Model, &inc.Type, &inc.Message, &inc.Fingerprint} {
		*p = d.string()
	}
	inc.Time = time.UnixMicro(d.varint()).UTC()
	inc.StatusCode = int(d.varint())
	inc.Code = ""
	if b[0] == incidentCodecV2 {
		// Version 2 always has a Code: an empty one is written as version 1.
		if inc.Code = d.string(); inc.Code == "" {
			d.bad = true
		}
	}
	if d.bad || d.off != len(b) {
		return errCorrupt
	}
	return nil
}

// decoder reads b from off, recording the first failure in bad; s is b as
// a string, which the decoded strings are cut from.
type decoder struct {
	b   []byte
	s   string
	off int
	bad bool
}

func (d *decoder) string() string {
	if d.bad {
		return ""
	}
	n, k := binary.Uvarint(d.b[d.off:])
	if k <= 0 || n > uint64(len(d.b)-d.off-k) {
		d.bad = true
		return ""
	}
	start := d.off + k
	d.off = start + int(n)
	return d.s[start:d.off]
}

func (d *decoder) varint() int64 {
	if d.bad {
		return 0
	}
	v, k := binary.Varint(d.b[d.off:])
	if k <= 0 {
		d.bad = true
		return 0
	}
	d.off += k
	return v
}
