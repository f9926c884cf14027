package bolt

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/stored"
	"github.com/scarproxy/scarproxy/store/storetest"
)

func TestIncidentCodec(t *testing.T) {
	tests := []struct {
		name string
		inc  store.Incident
	}{
		{"empty", store.Incident{Time: time.UnixMicro(0).UTC()}},
		{"full", store.Incident{ID: "0123456789abcdef0123456789", Time: stored.Time(time.Now()), Workspace: "w",
			Project: "p", Session: "s", Agent: "a", Provider: "openai", Model: "gpt", Type: store.TypeHTTPError,
			StatusCode: 429, Message: "rate limited\nretry", Fingerprint: "fp"}},
		{"before 1970", store.Incident{Time: time.Date(1900, 1, 1, 0, 0, 0, 1000, time.UTC), Message: "old"}},
		{"negative status and unicode", store.Incident{Time: time.UnixMicro(1).UTC(), StatusCode: -1, Message: "é\x00✓"}},
		{"long message", store.Incident{Time: time.UnixMicro(5).UTC(), Message: strings.Repeat("m", 70000)}},
		{"code", store.Incident{ID: "id", Time: time.UnixMicro(9).UTC(), Workspace: "w", Project: "p", Type: "network_error",
			Code: "ECONNRESET", Message: "socket hang up"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := appendIncident(nil, &tt.inc)
			// Records without a code keep the version 1 bytes files
			// written before codes existed hold.
			if want := byte(incidentCodecV1); tt.inc.Code != "" && b[0] != incidentCodecV2 || tt.inc.Code == "" && b[0] != want {
				t.Fatalf("version byte %d for code %q", b[0], tt.inc.Code)
			}
			var got store.Incident
			if err := decodeIncident(b, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.inc) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tt.inc)
			}
		})
	}
}

// TestDecodeIncidentVersion1 decodes a record as the first version of the
// codec wrote it, byte for byte.
func TestDecodeIncidentVersion1(t *testing.T) {
	b := []byte{1, 2, 'i', 'd', 1, 'w', 1, 'p', 0, 0, 0, 0, 4, 't', 'y', 'p', 'e', 3, 'm', 's', 'g', 0, 14, 0xa6, 0x07}
	var got store.Incident
	if err := decodeIncident(b, &got); err != nil {
		t.Fatal(err)
	}
	want := store.Incident{ID: "id", Workspace: "w", Project: "p", Type: "type", Message: "msg", Time: time.UnixMicro(7).UTC(), StatusCode: 467}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestDecodeIncidentCorrupt(t *testing.T) {
	good := appendIncident(nil, &store.Incident{ID: "id", Time: time.UnixMicro(7).UTC(), Message: "m"})
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"unknown version", append([]byte{9}, good[1:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing bytes", append(append([]byte{}, good...), 0)},
		{"length past end", []byte{incidentCodecV1, 0x7f}},
		{"huge length", []byte{incidentCodecV1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"version 2 without code", append(append([]byte{incidentCodecV2}, good[1:]...), 0)},
		{"version 2 missing code", append([]byte{incidentCodecV2}, good[1:]...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var inc store.Incident
			if err := decodeIncident(tt.b, &inc); err != errCorrupt {
				t.Fatalf("err = %v, want errCorrupt", err)
			}
		})
	}
}

// FuzzDecodeIncident checks that decoding never panics and that whatever
// decodes encodes back to the same bytes.
func FuzzDecodeIncident(f *testing.F) {
	f.Add(appendIncident(nil, &store.Incident{ID: "id", Time: time.UnixMicro(1).UTC(), Workspace: "w", Project: "p", Message: "m", StatusCode: 500}))
	f.Add([]byte{incidentCodecV1})
	f.Add(appendIncident(nil, &store.Incident{ID: "id", Time: time.UnixMicro(2).UTC(), Type: "t", Code: "ENOENT", Message: "m"}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var inc store.Incident
		if err := decodeIncident(b, &inc); err != nil {
			return
		}
		if again := appendIncident(nil, &inc); string(again) != string(b) {
			// Varints have one canonical form when written; a non-canonical
			// input may decode, but must then decode to the same record.
			var inc2 store.Incident
			if err := decodeIncident(again, &inc2); err != nil || !reflect.DeepEqual(inc, inc2) {
				t.Fatalf("re-encoding %x gave %x (%v)", b, again, err)
			}
		}
	})
}

// BenchmarkIncidentCodec compares decoding the stored form with JSON.
func BenchmarkIncidentCodec(b *testing.B) {
	inc := store.Incident{ID: stored.NewID(storetest.BenchNewest), Time: storetest.BenchNewest, Workspace: "bench", Project: "p",
		Session: "session-07", Agent: "agent-1", Provider: "openai", Model: "gpt-4o-mini", Type: store.TypeToolError,
		Message: "exit status 1: go test ./... failed: undefined: foo (compile error)", Fingerprint: "tool:go_test:undefined"}
	bin := appendIncident(nil, &inc)
	js, err := json.Marshal(&inc)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode=binary", func(b *testing.B) {
		b.ReportAllocs()
		b.ReportMetric(float64(len(bin)), "bytes")
		for b.Loop() {
			var out store.Incident
			if err := decodeIncident(bin, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode=json", func(b *testing.B) {
		b.ReportAllocs()
		b.ReportMetric(float64(len(js)), "bytes")
		for b.Loop() {
			var out store.Incident
			if err := json.Unmarshal(js, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
