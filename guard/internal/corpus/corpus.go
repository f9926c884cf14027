// Package corpus reads the labelled tool outputs in guard/testdata: txtar
// files whose entries are named fail/SOURCE/... or ok/SOURCE/... after
// how the command that printed them ended.
package corpus

import (
	"os"
	"strings"
)

// File is one entry of a txtar file: its name and its text.
type File struct {
	Name string
	Data string
}

// Failed reports whether the entry is the output of a command that failed
// (its name starts with fail/), and labelled whether its name starts with
// fail/ or ok/.
func (f File) Failed() (failed, labelled bool) {
	side, _, _ := strings.Cut(f.Name, "/")
	return side == "fail", side == "fail" || side == "ok"
}

// Read reads the entries of the txtar file at path: each starts at a line
// "-- NAME --" and holds the lines up to the next one; the text before the
// first is the file's comment, left out.
func Read(path string) ([]File, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(string(raw)), nil
}

// Parse reads the entries of a txtar text (see Read).
func Parse(text string) []File {
	var files []File
	start := -1 // where the current entry's text starts
	for off := 0; off < len(text); {
		end := strings.IndexByte(text[off:], '\n') + 1
		if end == 0 {
			end = len(text) - off
		}
		line := strings.TrimRight(text[off:off+end], "\n")
		if strings.HasPrefix(line, "-- ") && strings.HasSuffix(line, " --") && len(line) > 6 {
			if start >= 0 {
				files[len(files)-1].Data = text[start:off]
			}
			files = append(files, File{Name: strings.TrimSpace(line[3 : len(line)-3])})
			start = off + end
		}
		off += end
	}
	if start >= 0 {
		files[len(files)-1].Data = text[start:]
	}
	return files
}
