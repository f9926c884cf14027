package mock

import "strings"

// The frame around the blocks the proxy places in a conversation's turns
// rather than in its system text (wire.Framed), written out here:
// providers does not import the proxy.
const (
	frameStart = "<system-reminder>\nNote from scarproxy"
	frameEnd   = "</system-reminder>"
)

// told is everything the proxy told the model: the system text, then each
// frame of blocks found in texts, whole, in order, each after a blank
// line. [[mock:echo]] answers it and until= reads it.
func told(system string, texts ...string) string {
	parts := []string{system}
	if system == "" {
		parts = nil
	}
	for _, text := range texts {
		for {
			i := strings.Index(text, frameStart)
			if i < 0 {
				break
			}
			j := strings.Index(text[i:], frameEnd)
			if j < 0 {
				break
			}
			parts = append(parts, text[i:i+j+len(frameEnd)])
			text = text[i+j+len(frameEnd):]
		}
	}
	return strings.Join(parts, "\n\n")
}
