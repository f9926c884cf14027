package wire

import "encoding/json"

// OpenAIError is the body of an error in OpenAI's shape:
// {"error":{"message","type","param","code"}}.
func OpenAIError(e Error) []byte {
	body := struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Param   any    `json:"param"`
			Code    string `json:"code"`
		} `json:"error"`
	}{}
	body.Error.Message = e.Message
	body.Error.Type = e.Type
	body.Error.Code = e.Code
	b, _ := json.Marshal(body)
	return b
}

// Event is one server-sent event: an "event:" line when name is set, one
// "data:" line, and the blank line that ends it. data must be one line
// (compact JSON is).
func Event(name string, data []byte) []byte {
	var b []byte
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, '\n', '\n')
}
