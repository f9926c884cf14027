// Package stored holds the form in which every store backend keeps a
// value: text cleaned (see package store's doc, # Text), times in UTC
// whole microseconds, IDs that sort by time, dedupe keys of bounded
// length. Package store (for PrepareIncident) and both backends use it,
// so that a record reads back the same from either.
//
// It knows nothing of the store's records and imports only the standard
// library, so that package store can import it.
package stored

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Text returns s as both backends store it (see package store's doc,
// # Text): U+0000 and each run of bytes that is not UTF-8 become U+FFFD.
func Text(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// Time returns the form in which both backends store a time: UTC, whole
// microseconds (PostgreSQL's precision), no monotonic reading.
func Time(t time.Time) time.Time {
	return t.Truncate(time.Microsecond).UTC()
}

// CeilMicro rounds t up to a whole microsecond, so that for any stored
// (microsecond) time s, s < t exactly when s < CeilMicro(t).
func CeilMicro(t time.Time) time.Time {
	tr := t.Truncate(time.Microsecond)
	if tr.Before(t) {
		tr = tr.Add(time.Microsecond)
	}
	return tr.UTC()
}

// maxDedupeKey is the longest dedupe key stored as given; longer ones are
// stored as their SHA-256 (both backends index the key).
const maxDedupeKey = 256

// DedupeKey returns the form in which key is stored.
func DedupeKey(key string) string {
	if len(key) <= maxDedupeKey {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// NewID returns a 26-character identifier that sorts by t: 16 hex digits of
// t's Unix nanoseconds followed by 10 random hex digits. Two IDs made in the
// same nanosecond differ in their random part (40 bits).
func NewID(t time.Time) string {
	var b [13]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixNano()))
	// crypto/rand.Read never returns an error and always fills b.
	_, _ = rand.Read(b[8:])
	return hex.EncodeToString(b[:])
}

// Vector returns the bytes in which both backends store an embedding's
// values: each a float32, little-endian.
func Vector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// ParseVector reads the values Vector stored. It reports false when b's
// length is not a multiple of 4.
func ParseVector(b []byte) ([]float32, bool) {
	if len(b)%4 != 0 {
		return nil, false
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, true
}
