package wire

import "testing"

func TestEdits(t *testing.T) {
	body := []byte(`{"a":[1],"b":"x"}`)
	var e Edits
	if out := e.Apply(nil, body); &out[0] != &body[0] {
		t.Fatal("no edits: not the body itself")
	}
	e.Add(16, 16, []byte(`,"c":true`)) // added first, applied in order of offset
	e.Add(7, 7, []byte(`,2`))
	e.Add(7, 7, []byte(`,3`)) // the same offset: after the one added before it
	e.Add(14, 15, []byte(`y`))
	if got, want := string(e.Apply(make([]byte, 0, 4), body)), `{"a":[1,2,3],"b":"y","c":true}`; got != want {
		t.Fatalf("Apply = %s, want %s", got, want)
	}
}

// TestEditsWriteFramedElems: an edit's framed elements are written where
// it applies, between its text and its tail, in one copy sized for them;
// elements without text write nothing.
func TestEditsWriteFramedElems(t *testing.T) {
	body := []byte(`{"a":[1],"b":null}`)
	blocks := []Block{NewBlock("Guard: \"x\" failed\n")}
	elems := FramedElems{Comma: true, Open: `{"t":"`, Close: `"}`, Frames: [][]Block{blocks}}
	var e Edits
	e.AddElems(7, 7, nil, elems, "")
	first := elems
	first.Comma = false
	e.AddElems(13, 17, []byte("["), first, "]")
	e.AddElems(17, 17, []byte(`,"c":`), FramedElems{Open: `{"t":"`, Close: `"}`, Frames: [][]Block{{NewBlock("")}}}, "0")
	frame := `{"t":"` + string(AppendFramed(nil, blocks)) + `"}`
	want := `{"a":[1,` + frame + `],"b":[` + frame + `],"c":0}`
	// The room Apply computes is what it writes (a comma counted for the
	// element that has none): it writes into dst without growing it.
	dst := make([]byte, 0, len(want)+1)
	out := e.Apply(dst, body)
	if string(out) != want {
		t.Fatalf("Apply =\n%s\nwant\n%s", out, want)
	}
	if &out[:1][0] != &dst[:1][0] {
		t.Error("Apply grew its output past the room it computed")
	}
	if n := testing.AllocsPerRun(20, func() { e.Apply(nil, body) }); n != 1 && !raceOn {
		t.Errorf("Apply allocated %v times, want once", n)
	}
}
