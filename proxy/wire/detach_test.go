package wire

import (
	"strings"
	"testing"
	"unsafe"
)

func TestDetacher(t *testing.T) {
	region := `{"name":"read_file"}` + strings.Repeat("x", 1<<20)
	name := region[9:18]
	outside := strings.Clone("read_file")
	d := NewDetacher(region)
	got := d.Str(name)
	if got != "read_file" || unsafe.StringData(got) == unsafe.StringData(name) {
		t.Fatalf("a piece of the region: %q, copied %v", got, unsafe.StringData(got) != unsafe.StringData(name))
	}
	if again := d.Str(name); unsafe.StringData(again) != unsafe.StringData(got) {
		t.Fatal("the same piece was copied twice")
	}
	if o := d.Str(outside); unsafe.StringData(o) != unsafe.StringData(outside) {
		t.Fatal("a string outside the region was copied")
	}
	ss := []string{name, outside, ""}
	d.Strs(ss)
	if unsafe.StringData(ss[0]) == unsafe.StringData(name) || unsafe.StringData(ss[1]) != unsafe.StringData(outside) || ss[2] != "" {
		t.Fatalf("Strs: %q", ss)
	}
	small := `{"name":"read_file"}`
	if NewDetacher(small) != nil {
		t.Fatal("a small region gets a Detacher")
	}
	var none *Detacher
	if none.Str(name) != name {
		t.Fatal("a nil Detacher changed a string")
	}
}

// The names DefinedTools returns have bytes of their own: the loop
// tracker keeps them for the conversation, and a piece of the definitions
// would keep all of them alive (64 KB a conversation for Claude Code).
func TestDefinedToolsKeepNoPartOfTheDefinitions(t *testing.T) {
	defs := []byte(`[{"name":"Bash","description":"` + strings.Repeat("d", 64<<10) + `"},{"type":"function","function":{"name":"read"}}]`)
	names := DefinedTools(defs)
	if len(names) != 2 || names[0] != "Bash" || names[1] != "read" {
		t.Fatalf("names %q", names)
	}
	// Pieces of one copy of the definitions stand as far apart as in
	// them.
	apart := strings.Index(string(defs), `"read"`) - strings.Index(string(defs), `"Bash"`)
	if d := int(uintptr(unsafe.Pointer(unsafe.StringData(names[1]))) - uintptr(unsafe.Pointer(unsafe.StringData(names[0])))); d == apart {
		t.Fatalf("the names are pieces of one copy of the definitions (%d bytes apart)", d)
	}
}
