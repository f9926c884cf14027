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
