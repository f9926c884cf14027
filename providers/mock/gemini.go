package mock

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"
)

// The Gemini API: paths below the host that name their version, the model
// and the method (/v1beta/models/{model}:generateContent).

// isGeminiPath reports whether p is a path of the Gemini API, whose
// paths name their version (/v1beta/..., /v1/...): the other APIs' paths
// are below a root that names it (/chat/completions).
func isGeminiPath(p string) bool {
	version, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return strings.HasPrefix(version, "v1")
}

// geminiCall reads a path of the Gemini API: "/v1beta/models" (any
// version) is the list; "/v1beta/models/m:method" a model (unescaped)
// and a method, which is "" for the model itself. ok is false for any
// other path.
func geminiCall(p string) (model, method string, list, ok bool) {
	_, rest, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if rest == "models" {
		return "", "", true, true
	}
	name, found := strings.CutPrefix(rest, "models/")
	if !found || name == "" || strings.Contains(name, "/") {
		return "", "", false, false
	}
	name, method, _ = strings.Cut(name, ":")
	model, err := url.PathUnescape(name)
	return model, method, false, err == nil && model != ""
}

// gemini answers a request of the Gemini API at path p.
func (m *Transport) gemini(req *http.Request, p string, body []byte) (*http.Response, error) {
	model, method, list, ok := geminiCall(p)
	switch {
	case !ok:
	case req.Method == http.MethodGet && list:
		return m.geminiModels(req), nil
	case req.Method == http.MethodGet && method == "" && !list:
		return jsonResponse(req, http.StatusOK, mustJSON(geminiModelOf(model))), nil
	case req.Method == http.MethodPost && method == "countTokens":
		if !gjson.ValidBytes(body) {
			return geminiError(req, http.StatusBadRequest, "Invalid JSON payload received."), nil
		}
		return jsonResponse(req, http.StatusOK, mustJSON(map[string]int{"totalTokens": tokens(len(body))})), nil
	case req.Method == http.MethodPost && (method == "generateContent" || method == "streamGenerateContent"):
		return m.generate(req, body, model, method == "streamGenerateContent")
	}
	return geminiError(req, http.StatusNotFound, "Method not found."), nil
}

// generate answers generateContent, and streamGenerateContent: as an
// event stream with alt=sse, else as a JSON array of its chunks.
func (m *Transport) generate(req *http.Request, body []byte, model string, stream bool) (*http.Response, error) {
	if !gjson.ValidBytes(body) {
		return geminiError(req, http.StatusBadRequest, "Invalid JSON payload received. Unexpected token."), nil
	}
	contents := gjson.GetBytes(body, "contents")
	if !contents.IsArray() || len(contents.Array()) == 0 {
		return geminiError(req, http.StatusBadRequest, "* GenerateContentRequest.contents: contents is not specified\n"), nil
	}
	sysKey := "systemInstruction"
	if !gjson.GetBytes(body, sysKey).Exists() {
		sysKey = "system_instruction"
	}
	t := geminiTurn(contents)
	t.model, t.first = model, geminiFirstUserText(contents)
	t.system, t.elsewhere = contentText(gjson.GetBytes(body, sysKey+".parts")), []gjson.Result{contents}
	t.prompt = promptOf(body, "tools", sysKey, "contents")
	mode := gjson.GetBytes(body, "toolConfig.functionCallingConfig.mode")
	if !mode.Exists() {
		mode = gjson.GetBytes(body, "tool_config.function_calling_config.mode")
	}
	t.toolsForbidden = mode.String() == "NONE"
	r, d, err := m.answer(req, body, t)
	if err != nil {
		return nil, err
	}
	if s := d.errorStatus(); s != 0 {
		return geminiStatus(req, s, model), nil
	}
	a := newGeminiAnswer(r)
	switch {
	case !stream:
		return jsonResponse(req, http.StatusOK, mustJSON(a.response(a.parts(r.text), "STOP", a.usage))), nil
	case req.URL.Query().Get("alt") == "sse":
		h := http.Header{}
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		return m.stream(req, a.script(), d, h), nil
	}
	return jsonResponse(req, http.StatusOK, a.array(d)), nil
}

// geminiTurn reads the turn of a Gemini request: the text of the last
// user content that is not only function responses, whether it is the
// conversation's last content, and the function calls (functionCall
// parts of model contents) and responses (functionResponse parts) after
// it. Text parts that hold only the proxy's blocks do not count (see
// [placedOnly]); blocks placed in the user text are not part of it.
func geminiTurn(contents gjson.Result) turn {
	arr := contents.Array()
	last := len(arr) - 1
	for last >= 0 && isUser(arr[last]) && noGeminiUserText(arr[last].Get("parts")) && !hasFunctionResponses(arr[last].Get("parts")) {
		last--
	}
	for i := last; i >= 0; i-- {
		if !isUser(arr[i]) || noGeminiUserText(arr[i].Get("parts")) {
			continue
		}
		t := turn{user: withoutBlocks(contentText(arr[i].Get("parts"))), userLast: i == last}
		for _, c := range arr[i+1:] {
			model := c.Get("role").Str == "model"
			c.Get("parts").ForEach(func(_, part gjson.Result) bool {
				switch {
				case !model && functionPart(part, "functionResponse", "function_response").Exists():
					t.results++
				case model:
					if fc := functionPart(part, "functionCall", "function_call"); fc.IsObject() {
						t.calls = append(t.calls, pastCall{name: fc.Get("name").Str, args: fc.Get("args").Raw})
					}
				}
				return true
			})
		}
		return t
	}
	return turn{}
}

// isUser reports whether c is a user content: of role user, or of no
// role (the API's default).
func isUser(c gjson.Result) bool {
	role := c.Get("role")
	return !role.Exists() || role.Str == "user"
}

// functionPart is a part's member of the JSON name, else of the proto
// name (the API takes both).
func functionPart(part gjson.Result, name, protoName string) gjson.Result {
	if v := part.Get(name); v.Exists() {
		return v
	}
	return part.Get(protoName)
}

// noGeminiUserText reports whether a user content's parts hold no text
// of the agent's: each is a function response or a text part holding
// only the proxy's blocks (see [onlyBlocks]), and there is one.
func noGeminiUserText(parts gjson.Result) bool {
	n, others := 0, 0
	parts.ForEach(func(_, part gjson.Result) bool {
		n++
		if !functionPart(part, "functionResponse", "function_response").Exists() && !onlyBlocks(part.Get("text").Str) {
			others++
		}
		return true
	})
	return n > 0 && others == 0
}

func hasFunctionResponses(parts gjson.Result) bool {
	found := false
	parts.ForEach(func(_, part gjson.Result) bool {
		found = functionPart(part, "functionResponse", "function_response").Exists()
		return !found
	})
	return found
}

// geminiFirstUserText is the text of the first user content that is not
// only the proxy's blocks.
func geminiFirstUserText(contents gjson.Result) string {
	for _, c := range contents.Array() {
		if isUser(c) && !placedOnly(c.Get("parts")) {
			return contentText(c.Get("parts"))
		}
	}
	return ""
}

// geminiCached is the cachedContentTokenCount the Gemini API reports for
// a cached prefix of prefixTokens (its implicit cache): none below 1024
// tokens, then all of them.
func geminiCached(prefixTokens int) int {
	if prefixTokens < 1024 {
		return 0
	}
	return prefixTokens
}

// geminiAnswer is a reply in the shape of the Gemini API.
type geminiAnswer struct {
	reply
	id    string
	usage *geminiUsageJSON
}

func newGeminiAnswer(r reply) *geminiAnswer {
	cached := geminiCached(tokens(r.prefix))
	u := &geminiUsageJSON{
		PromptTokenCount: r.inTokens, CandidatesTokenCount: r.outTokens, TotalTokenCount: r.inTokens + r.outTokens,
		CachedContentTokenCount: cached,
		PromptTokensDetails:     []modalityJSON{{Modality: "TEXT", TokenCount: r.inTokens}},
	}
	if cached > 0 {
		u.CacheTokensDetails = []modalityJSON{{Modality: "TEXT", TokenCount: cached}}
	}
	return &geminiAnswer{reply: r, id: hex.EncodeToString(r.sum[:11]), usage: u}
}

// The wire types below list fields in the order the Gemini API sends
// them.

type geminiResponseJSON struct {
	Candidates    []candidateJSON  `json:"candidates"`
	UsageMetadata *geminiUsageJSON `json:"usageMetadata,omitempty"`
	ModelVersion  string           `json:"modelVersion"`
	ResponseID    string           `json:"responseId"`
}

type candidateJSON struct {
	Content      geminiContentJSON `json:"content"`
	FinishReason string            `json:"finishReason,omitempty"`
	Index        int               `json:"index"`
}

type geminiContentJSON struct {
	Parts []geminiPartJSON `json:"parts"`
	Role  string           `json:"role"`
}

// geminiPartJSON is a text part or a functionCall part.
type geminiPartJSON struct {
	Text         *string           `json:"text,omitempty"`
	FunctionCall *functionCallJSON `json:"functionCall,omitempty"`
}

type functionCallJSON struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type geminiUsageJSON struct {
	PromptTokenCount        int            `json:"promptTokenCount"`
	CandidatesTokenCount    int            `json:"candidatesTokenCount,omitempty"`
	TotalTokenCount         int            `json:"totalTokenCount"`
	CachedContentTokenCount int            `json:"cachedContentTokenCount,omitempty"`
	PromptTokensDetails     []modalityJSON `json:"promptTokensDetails,omitempty"`
	CacheTokensDetails      []modalityJSON `json:"cacheTokensDetails,omitempty"`
}

type modalityJSON struct {
	Modality   string `json:"modality"`
	TokenCount int    `json:"tokenCount"`
}

// parts returns the answer's parts: the function call, or text.
func (a *geminiAnswer) parts(text string) []geminiPartJSON {
	if a.tool != "" {
		return []geminiPartJSON{{FunctionCall: &functionCallJSON{Name: a.tool, Args: json.RawMessage(a.args)}}}
	}
	return []geminiPartJSON{{Text: &text}}
}

func (a *geminiAnswer) response(parts []geminiPartJSON, finish string, usage *geminiUsageJSON) *geminiResponseJSON {
	return &geminiResponseJSON{
		Candidates:    []candidateJSON{{Content: geminiContentJSON{Parts: parts, Role: "model"}, FinishReason: finish}},
		UsageMetadata: usage,
		ModelVersion:  a.model,
		ResponseID:    a.id,
	}
}

// chunks returns the streamed answer: a chunk per piece of text, each
// with the usage of the prompt so far, the last one with the candidate's
// finishReason and the whole usage; a function call comes whole, in one
// chunk.
func (a *geminiAnswer) chunks() [][]byte {
	if a.tool != "" {
		return [][]byte{mustJSON(a.response(a.parts(""), "STOP", a.usage))}
	}
	partial := &geminiUsageJSON{PromptTokenCount: a.usage.PromptTokenCount, TotalTokenCount: a.usage.PromptTokenCount, PromptTokensDetails: a.usage.PromptTokensDetails}
	pieces := splitPieces(a.text)
	if len(pieces) == 0 {
		pieces = []string{""}
	}
	out := make([][]byte, 0, len(pieces))
	for i, piece := range pieces {
		if i == len(pieces)-1 {
			out = append(out, mustJSON(a.response(a.parts(piece), "STOP", a.usage)))
		} else {
			out = append(out, mustJSON(a.response(a.parts(piece), "", partial)))
		}
	}
	return out
}

// geminiStreamError is the error a stream_error directive sends.
var geminiStreamError = []byte(`{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`)

// script returns the answer as alt=sse events: data-only, one per chunk.
func (a *geminiAnswer) script() script {
	var out []sseEvent
	for _, c := range a.chunks() {
		out = append(out, sseEvent{data: c})
	}
	return script{events: out, final: 1, fail: sseEvent{data: geminiStreamError}}
}

// array returns the answer as streamGenerateContent sends it without
// alt=sse: a JSON array of its chunks. truncate leaves out the last chunk
// and the array's end; stream_error puts the error after the first chunk
// and ends the array there.
func (a *geminiAnswer) array(d directives) []byte {
	chunks := a.chunks()
	switch {
	case d.truncate:
		chunks = chunks[:len(chunks)-1]
	case d.streamError:
		chunks = append(chunks[:1:1], geminiStreamError)
	}
	b := []byte{'['}
	for i, c := range chunks {
		if i > 0 {
			b = append(b, ",\r\n"...)
		}
		b = append(b, c...)
	}
	if d.truncate {
		return b
	}
	return append(b, ']')
}

// geminiModelJSON is a model as the Gemini API lists it.
type geminiModelJSON struct {
	Name                       string   `json:"name"`
	Version                    string   `json:"version"`
	DisplayName                string   `json:"displayName"`
	Description                string   `json:"description"`
	InputTokenLimit            int      `json:"inputTokenLimit"`
	OutputTokenLimit           int      `json:"outputTokenLimit"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
}

func geminiModelOf(id string) geminiModelJSON {
	return geminiModelJSON{
		Name: "models/" + id, Version: "001", DisplayName: id, Description: "scarproxy's offline mock model",
		InputTokenLimit: 1048576, OutputTokenLimit: 65536,
		SupportedGenerationMethods: []string{"generateContent", "countTokens"},
	}
}

// geminiModels answers GET /v1beta/models: [Models], in the Gemini API's
// shape.
func (m *Transport) geminiModels(req *http.Request) *http.Response {
	var out struct {
		Models []geminiModelJSON `json:"models"`
	}
	for _, id := range Models {
		out.Models = append(out.Models, geminiModelOf(id))
	}
	return jsonResponse(req, http.StatusOK, mustJSON(out))
}

// geminiError answers status with the Gemini API's error body:
// {"error":{"code","message","status"}}.
func geminiError(req *http.Request, status int, message string) *http.Response {
	return geminiErrorWith(req, status, message, nil)
}

func geminiErrorWith(req *http.Request, status int, message string, details []any) *http.Response {
	var e struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
			Details []any  `json:"details,omitempty"`
		} `json:"error"`
	}
	e.Error.Code, e.Error.Message, e.Error.Status, e.Error.Details = status, message, googleStatus(status), details
	return jsonResponse(req, status, mustJSON(e))
}

// googleStatus is the name of Google's status code for an HTTP status.
func googleStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if status < 500 {
		return "FAILED_PRECONDITION"
	}
	return "INTERNAL"
}

// geminiStatus answers status with the error body the Gemini API sends
// for it.
func geminiStatus(req *http.Request, status int, model string) *http.Response {
	switch status {
	case http.StatusBadRequest:
		return geminiError(req, status, "Request contains an invalid argument.")
	case http.StatusUnauthorized:
		return geminiError(req, status, "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
	case http.StatusForbidden:
		return geminiError(req, status, "The caller does not have permission")
	case http.StatusNotFound:
		return geminiError(req, status, "models/"+model+" is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.")
	case http.StatusTooManyRequests:
		return geminiErrorWith(req, status, "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
			[]any{map[string]string{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "20s"}})
	case http.StatusInternalServerError:
		return geminiError(req, status, "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting")
	case http.StatusServiceUnavailable:
		return geminiError(req, status, "The model is overloaded. Please try again later.")
	case http.StatusGatewayTimeout:
		return geminiError(req, status, "The request timed out. Please try again.")
	}
	return geminiError(req, status, http.StatusText(status))
}
