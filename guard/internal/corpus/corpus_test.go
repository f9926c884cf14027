package corpus

import "testing"

func TestParse(t *testing.T) {
	files := Parse("a comment\n-- fail/local/x/a --\nline 1\n-- not a name\n\n-- ok/local/x/b --\nlast")
	want := []File{{"fail/local/x/a", "line 1\n-- not a name\n\n"}, {"ok/local/x/b", "last"}}
	if len(files) != len(want) {
		t.Fatalf("Parse = %q", files)
	}
	for i := range want {
		if files[i] != want[i] {
			t.Errorf("file %d = %q, want %q", i, files[i], want[i])
		}
	}
	for _, c := range []struct {
		name             string
		failed, labelled bool
	}{{"fail/local/x/a", true, true}, {"ok/github/o/r/1/a", false, true}, {"notes/a", false, false}} {
		if f, l := (File{Name: c.name}).Failed(); f != c.failed || l != c.labelled {
			t.Errorf("Failed(%q) = %v, %v", c.name, f, l)
		}
	}
	if _, err := Read("no-such-file.txtar"); err == nil {
		t.Error("Read of a missing file: no error")
	}
}
