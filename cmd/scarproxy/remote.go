package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// apiAccess is memoryAccess through a running proxy's memory API
// (/scar/v1), for a store that proxy holds (bbolt admits one process) or
// that the shell cannot reach.
type apiAccess struct {
	base   string // the proxy's address, without a trailing slash
	token  string // the admin token or a gateway key; "" on an open memory API
	client *http.Client
}

var _ memoryAccess = (*apiAccess)(nil)

// apiTimeout bounds one call to the memory API.
const apiTimeout = 30 * time.Second

// newAPIAccess checks the proxy's address (http or https, with a host)
// and returns the access through it.
func newAPIAccess(target, token string) (*apiAccess, error) {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError{fmt.Sprintf("--url %q: want the proxy's address, e.g. http://127.0.0.1:8080", target)}
	}
	base := strings.TrimSuffix(strings.TrimSuffix(target, "/"), "/scar/v1")
	return &apiAccess{base: base, token: token, client: &http.Client{Timeout: apiTimeout}}, nil
}

func (a *apiAccess) Close() error { a.client.CloseIdleConnections(); return nil }

// apiError is an answer of the memory API other than a success.
type apiError struct {
	Method, Path string
	Status       int
	Message      string
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Status == http.StatusUnauthorized {
		msg += " (set SCARPROXY_ADMIN_TOKEN to the admin token or a gateway key)"
	}
	return msg
}

// call sends one request to the memory API: q as the query, in (when not
// nil) as the JSON body; it decodes a JSON answer into out (when not nil).
func (a *apiAccess) call(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	u := a.base + "/scar/v1" + path
	if enc := q.Encode(); enc != "" {
		u += "?" + enc
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	res, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("memory API: %w", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("memory API: %s %s: %w", method, path, err)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return &apiError{Method: method, Path: path, Status: res.StatusCode, Message: errorMessage(b)}
	}
	if out == nil || res.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("memory API: %s %s: the answer is not what this version of scarproxy expects: %w", method, path, err)
	}
	return nil
}

// errorMessage returns the message of an error answer (OpenAI's shape,
// which the memory API answers in), or its start.
func errorMessage(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return oneLine(string(b), 200)
}

// values builds a query of the pairs that are not empty.
func values(kv ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q
}

// limitValue is a limit for the query ("" for 0: the API's default).
func limitValue(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func (a *apiAccess) AddSolution(ctx context.Context, in solutionIn) (store.Solution, error) {
	var sol store.Solution
	err := a.call(ctx, http.MethodPost, "/solutions", nil, in, &sol)
	return sol, err
}

func (a *apiAccess) ListSolutions(ctx context.Context, workspace string) ([]store.Solution, error) {
	var out struct {
		Solutions []store.Solution `json:"solutions"`
	}
	err := a.call(ctx, http.MethodGet, "/solutions", values("workspace", workspace), nil, &out)
	return out.Solutions, err
}

func (a *apiAccess) DeleteSolution(ctx context.Context, workspace, id string) error {
	return a.call(ctx, http.MethodDelete, "/solutions/"+url.PathEscape(id), values("workspace", workspace), nil, nil)
}

func (a *apiAccess) MarkSolution(ctx context.Context, workspace, id string, wrong bool, note string) (store.Solution, error) {
	var out store.Solution
	method, in := markRequest(wrong, note)
	err := a.call(ctx, method, "/solutions/"+url.PathEscape(id)+"/wrong", values("workspace", workspace), in, &out)
	return out, err
}

func (a *apiAccess) MarkFix(ctx context.Context, workspace, project, id string, wrong bool, note string) (store.Fix, error) {
	var out store.Fix
	method, in := markRequest(wrong, note)
	err := a.call(ctx, method, "/fixes/"+url.PathEscape(id)+"/wrong", values("workspace", workspace, "project", project), in, &out)
	return out, err
}

// markRequest is the method and body of a call that marks a memory wrong
// (POST, with the note) or clears its mark (DELETE).
func markRequest(wrong bool, note string) (string, any) {
	if !wrong {
		return http.MethodDelete, nil
	}
	return http.MethodPost, map[string]string{"note": note}
}

func (a *apiAccess) Recall(ctx context.Context, q recall.Query) ([]recall.Match, float64, error) {
	var out struct {
		Matches       []recall.Match `json:"matches"`
		MinSimilarity float64        `json:"min_similarity"`
	}
	err := a.call(ctx, http.MethodGet, "/recall", values("workspace", q.Workspace, "project", q.Project, "goal", q.Goal, "k", limitValue(q.K)), nil, &out)
	return out.Matches, out.MinSimilarity, err
}

func (a *apiAccess) ListIncidents(ctx context.Context, q store.IncidentQuery) ([]store.Incident, error) {
	var out struct {
		Incidents []store.Incident `json:"incidents"`
	}
	err := a.call(ctx, http.MethodGet, "/incidents", values("workspace", q.Workspace, "project", q.Project,
		"session", q.Session, "limit", limitValue(q.Limit)), nil, &out)
	return out.Incidents, err
}

// Guard returns the memory API's guard preview: the guard the proxy's
// next request of that conversation would get (without one, a request of
// no conversation: provider failures only).
func (a *apiAccess) Guard(ctx context.Context, workspace, project, session string) (guardShown, error) {
	out := guardShown{Incidents: -1}
	if err := a.call(ctx, http.MethodGet, "/guard", values("workspace", workspace, "project", project, "session", session), nil, &out); err != nil {
		return out, err
	}
	if len(out.Patterns) > 0 {
		return out, nil
	}
	// Nothing repeated: say in what window, as the proxy counts it.
	var pats struct {
		Window string `json:"window"`
	}
	if err := a.call(ctx, http.MethodGet, "/patterns", nil, nil, &pats); err != nil {
		return out, err
	}
	out.Window, _ = time.ParseDuration(pats.Window)
	return out, nil
}

func (a *apiAccess) ListFixes(ctx context.Context, q store.FixQuery) ([]store.Fix, error) {
	var out struct {
		Fixes []store.Fix `json:"fixes"`
	}
	err := a.call(ctx, http.MethodGet, "/fixes", values("workspace", q.Workspace, "project", q.Project, "limit", limitValue(q.Limit)), nil, &out)
	return out.Fixes, err
}

func (a *apiAccess) DeleteFix(ctx context.Context, workspace, project, id string) error {
	return a.call(ctx, http.MethodDelete, "/fixes/"+url.PathEscape(id), values("workspace", workspace, "project", project), nil, nil)
}
