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
