package ui

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// incidentTypes are the types the filter offers.
var incidentTypes = []string{store.TypeToolError, store.TypeHTTPError, store.TypeTimeout,
	store.TypeUnreachable, store.TypeStreamError, store.TypeLoop}

// pageSize is the incidents shown per page.
const pageSize = 50

// incidentRow is one incident as listed.
type incidentRow struct {
	store.Incident
	Pattern string
	Label   store.Conversation // the label of its conversation, if stored
}

func rows(incs []store.Incident, pats []string, labels map[string]store.Conversation) []incidentRow {
	out := make([]incidentRow, len(incs))
	for i, inc := range incs {
		out[i] = incidentRow{Incident: inc, Label: labels[inc.Session]}
		if i < len(pats) {
			out[i].Pattern = pats[i]
		}
	}
	return out
}

// labels returns the stored labels of the conversations of incs and of
// ids, as far as the store answers: a page is shown without them (its
// conversations by their ids) when it does not.
func (h *Handler) labels(ctx context.Context, p *page, incs []store.Incident, ids ...string) map[string]store.Conversation {
	for _, inc := range incs {
		if inc.Session != "" {
			ids = append(ids, inc.Session)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) > 0 && ids[0] == "" {
		ids = ids[1:]
	}
	if len(ids) == 0 {
		return nil
	}
	ids = ids[:min(len(ids), store.MaxConversationBatch)]
	out, err := h.src.Conversations(ctx, p.WS, p.Proj, ids)
	if err != nil {
		h.log.Warn("ui: reading conversation labels failed", "err", err)
		return nil
	}
	return out
}

type incidentsData struct {
	Spans    []span
	Span     span
	Types    []string
	Patterns []string
	// The filter as asked.
	Type, Pattern, Provider, Model, Session string
	Rows                                    []incidentRow
	Next                                    string // the URL of the next page, if any
	First                                   string // the URL of the first page, when not on it
	Matching                                int    // incidents in the range matching type, pattern and provider
}

func (h *Handler) incidents(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	ctx := r.Context()
	q := r.URL.Query()
	sp := spanOf(q.Get("range"))
	since, until := rangeOf(sp, h.opts.Now())
	d := incidentsData{Spans: spans, Span: sp, Types: incidentTypes, Type: q.Get("type"), Pattern: q.Get("pattern"),
		Provider: q.Get("provider"), Model: q.Get("model"), Session: q.Get("session")}
	groups, err := h.src.Groups(ctx, p.WS, p.Proj, since, until)
	if err != nil {
		h.fail(w, r, p, err)
		return
	}
	f := store.IncidentFilter{Workspace: p.WS, Project: p.Proj, Session: d.Session, Type: d.Type, Provider: d.Provider,
		Model: d.Model, Since: since, Cursor: q.Get("cursor"), Limit: pageSize}
	seenPat := map[string]bool{}
	fpSet := map[string]bool{}
	for _, g := range groups {
		if !seenPat[g.Pattern] {
			seenPat[g.Pattern] = true
			d.Patterns = append(d.Patterns, g.Pattern)
		}
		if (d.Type == "" || g.Type == d.Type) && (d.Provider == "" || g.Provider == d.Provider) &&
			(d.Pattern == "" || g.Pattern == d.Pattern) {
			d.Matching += g.Count
			if d.Pattern != "" && !fpSet[g.Fingerprint] {
				fpSet[g.Fingerprint] = true
				f.Fingerprints = append(f.Fingerprints, g.Fingerprint)
			}
		}
	}
	slices.Sort(d.Patterns)
	if d.Pattern != "" && len(f.Fingerprints) == 0 {
		// No group of that pattern in the range: nothing matches.
		d.Rows = []incidentRow{}
	} else {
		page, pats, err := h.src.Incidents(ctx, f)
		if err != nil {
			h.fail(w, r, p, err)
			return
		}
		d.Rows = rows(page.Incidents, pats, h.labels(r.Context(), p, page.Incidents))
		if d.Pattern != "" {
			// Fingerprints name the pattern's groups; a fingerprint shared
			// with another pattern (another type) is filtered here.
			kept := d.Rows[:0]
			for _, row := range d.Rows {
				if row.Pattern == d.Pattern {
					kept = append(kept, row)
				}
			}
			d.Rows = kept
		}
		if page.Next != "" {
			nq := cloneQuery(q)
			nq.Set("cursor", page.Next)
			d.Next = "/ui/incidents?" + nq.Encode()
		}
	}
	if q.Get("cursor") != "" {
		fq := cloneQuery(q)
		fq.Del("cursor")
		d.First = "/ui/incidents?" + fq.Encode()
	}
	p.Title = "Incidents"
	p.Data = d
	h.render(w, http.StatusOK, "incidents", p)
}

func cloneQuery(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = slices.Clone(v)
	}
	return out
}

type groupData struct {
	Fingerprint, Pattern, Example string
	Count                         int
	Span                          span
	Rows                          []incidentRow
	Next                          string
}

// group shows a fingerprint's occurrences and a sanitised example.
func (h *Handler) group(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	ctx := r.Context()
	fp := r.PathValue("fp")
	sp := spanOf("30d")
	since, until := rangeOf(sp, h.opts.Now())
	d := groupData{Fingerprint: fp, Span: sp}
	groups, err := h.src.Groups(ctx, p.WS, p.Proj, since, until)
	if err != nil {
		h.fail(w, r, p, err)
		return
	}
	for _, g := range groups {
		if g.Fingerprint == fp {
			d.Count += g.Count
			d.Pattern = g.Pattern
		}
	}
	page, pats, err := h.src.Incidents(ctx, store.IncidentFilter{Workspace: p.WS, Project: p.Proj,
		Fingerprints: []string{fp}, Cursor: r.FormValue("cursor"), Limit: pageSize})
	if err != nil {
		h.fail(w, r, p, err)
		return
	}
	if len(page.Incidents) == 0 && r.FormValue("cursor") == "" {
		h.errorPage(w, http.StatusNotFound, "No incident of this tenant has that fingerprint (it may have been pruned).", p)
		return
	}
	d.Rows = rows(page.Incidents, pats, h.labels(r.Context(), p, page.Incidents))
	if len(page.Incidents) > 0 {
		d.Example = guard.Sanitize(guard.Redact(page.Incidents[0].Message), 2000)
		d.Pattern = cmp.Or(d.Pattern, d.Rows[0].Pattern)
	}
	if page.Next != "" {
		d.Next = "/ui/groups/" + url.PathEscape(fp) + "?" + string(p.Tenant) + "&cursor=" + url.QueryEscape(page.Next)
	}
	p.Title = "Failure group"
	p.Data = d
	h.render(w, http.StatusOK, "group", p)
}

type conversationData struct {
	Session string
	Label   store.Conversation // zero: none stored
	Turns   []turnRow
	Usage   store.Usage // the conversation's token usage (Requests 0: none reported)
}

type turnRow struct {
	Turn
	Changed bool // the guard differs from the one before
}

// conversation shows a conversation's failures in order and the guard
// its next request got after each.
func (h *Handler) conversation(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	sess := r.PathValue("session")
	turns, err := h.src.Conversation(r.Context(), p.WS, p.Proj, sess)
	if err != nil {
		h.fail(w, r, p, err)
		return
	}
	d := conversationData{Session: sess, Label: h.labels(r.Context(), p, nil, sess)[sess]}
	usage, err := h.src.Usage(r.Context(), store.UsageQuery{Workspace: p.WS, Project: p.Proj, Conversation: sess, By: store.UsageByConversation})
	if err != nil {
		h.fail(w, r, p, err)
		return
	}
	if len(usage) > 0 {
		d.Usage = usage[0]
	}
	prev := ""
	for _, t := range turns {
		d.Turns = append(d.Turns, turnRow{Turn: t, Changed: t.Guard != prev})
		if t.Incident.Type != store.TypeLoop {
			prev = t.Guard
		}
	}
	p.Title = "Conversation " + sess
	p.Data = d
	h.render(w, http.StatusOK, "conversation", p)
}

type guardData struct {
	Conversation string
	Text         string
}

// guardPreview shows the blocks the tenant's next request would get.
func (h *Handler) guardPreview(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	conv := strings.TrimSpace(r.FormValue("conversation"))
	text, err := h.src.GuardPreview(r.Context(), p.WS, p.Proj, conv)
	if err != nil {
		h.fail(w, r, p, err)
		return
	}
	p.Title = "Guard preview"
	p.Data = guardData{Conversation: conv, Text: text}
	h.render(w, http.StatusOK, "guard", p)
}

type solutionsData struct {
	Query         string
	Searched      bool
	Matches       []recall.Match
	MinSimilarity float64
	List          []store.Solution
	Total         int
}

// maxListed is how many solutions the list shows; search finds the rest.
const maxListed = 200

func (h *Handler) solutions(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	ctx := r.Context()
	d := solutionsData{Query: strings.TrimSpace(r.FormValue("q"))}
	if d.Query != "" {
		m, minSim, err := h.src.SearchSolutions(ctx, s.p, p.WS, "", d.Query)
		if err != nil {
			h.fail(w, r, p, err)
			return
		}
		d.Searched, d.Matches, d.MinSimilarity = true, m, minSim
	} else {
		sols, err := h.src.Solutions(ctx, s.p, p.WS)
		if err != nil {
			h.fail(w, r, p, err)
			return
		}
		d.Total = len(sols)
		d.List = sols[:min(len(sols), maxListed)]
	}
	p.Title = "Solutions"
	p.Message = r.FormValue("done")
	p.Data = d
	h.render(w, http.StatusOK, "solutions", p)
}

// back sends the browser to the solutions list with a notice.
func back(w http.ResponseWriter, r *http.Request, p *page, to, notice string) {
	http.Redirect(w, r, to+"?"+string(p.Tenant)+"&done="+url.QueryEscape(notice), http.StatusSeeOther)
}

func (h *Handler) editSolution(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	id := r.PathValue("id")
	sol := store.Solution{Workspace: p.WS, Confidence: 0.9}
	if id != "new" {
		sols, err := h.src.Solutions(r.Context(), s.p, p.WS)
		if err != nil {
			h.fail(w, r, p, err)
			return
		}
		i := slices.IndexFunc(sols, func(x store.Solution) bool { return x.ID == id })
		if i < 0 {
			h.fail(w, r, p, ErrNotFound)
			return
		}
		sol = sols[i]
	}
	p.Title = "Edit solution"
	p.Data = sol
	h.render(w, http.StatusOK, "edit", p)
}

func (h *Handler) saveSolution(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	id := r.PathValue("id")
	if id == "new" {
		id = ""
	}
	conf, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(r.PostFormValue("confidence"), "%")), 64)
	if err != nil {
		h.fail(w, r, p, fmt.Errorf("%w: confidence: must be a number from 0 to 1 (or a percentage)", ErrBadInput))
		return
	}
	sol := store.Solution{ID: id, Workspace: p.WS, Project: strings.TrimSpace(r.PostFormValue("solution_project")),
		Goal: r.PostFormValue("goal"), Approach: r.PostFormValue("approach"), Outcome: r.PostFormValue("outcome"), Confidence: conf}
	if _, err := h.src.SaveSolution(r.Context(), s.p, sol); err != nil {
		h.fail(w, r, p, err)
		return
	}
	back(w, r, p, "/ui/solutions", "Solution saved.")
}

func (h *Handler) verifySolution(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	if err := h.src.VerifySolution(r.Context(), s.p, p.WS, r.PathValue("id")); err != nil {
		h.fail(w, r, p, err)
		return
	}
	back(w, r, p, "/ui/solutions", "Solution marked verified.")
}

func (h *Handler) deleteSolution(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	if err := h.src.DeleteSolution(r.Context(), s.p, p.WS, r.PathValue("id")); err != nil {
		h.fail(w, r, p, err)
		return
	}
	back(w, r, p, "/ui/solutions", "Solution deleted.")
}

// markSolution marks a solution wrong (with the form's note) or clears
// its mark.
func (h *Handler) markSolution(wrong bool) func(http.ResponseWriter, *http.Request, *session, *page) {
	return func(w http.ResponseWriter, r *http.Request, s *session, p *page) {
		if err := h.src.MarkSolution(r.Context(), s.p, p.WS, r.PathValue("id"), wrong, r.FormValue("note")); err != nil {
			h.fail(w, r, p, err)
			return
		}
		done := "Solution marked wrong: it is kept, and no agent is shown it."
		if !wrong {
			done = "Mark removed: the solution is recalled again."
		}
		back(w, r, p, "/ui/solutions", done)
	}
}

// exportSolutions downloads the workspace's solutions as the memory API
// lists them: {"solutions": [...]}.
func (h *Handler) exportSolutions(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	sols, err := h.src.Solutions(r.Context(), s.p, p.WS)
	if err != nil {
		h.fail(w, r, p, err)
		return
	}
	b, err := json.MarshalIndent(map[string]any{"solutions": sols}, "", "  ")
	if err != nil {
		h.fail(w, r, p, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", `attachment; filename="scarproxy-solutions-`+p.WS+`.json"`)
	_, _ = w.Write(b)
}

// importSolutions stores the solutions of an export (a file or pasted
// text) in the current workspace, each as a verified solution.
func (h *Handler) importSolutions(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	var data []byte
	if f, _, err := r.FormFile("file"); err == nil {
		data, err = io.ReadAll(io.LimitReader(f, 8<<20))
		f.Close()
		if err != nil {
			h.fail(w, r, p, fmt.Errorf("%w: the file could not be read", ErrBadInput))
			return
		}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte(r.PostFormValue("json"))
	}
	var in struct {
		Solutions []store.Solution `json:"solutions"`
	}
	if err := json.Unmarshal(data, &in); err != nil {
		// A bare array is accepted too.
		if err2 := json.Unmarshal(data, &in.Solutions); err2 != nil {
			h.fail(w, r, p, fmt.Errorf("%w: not a solutions export: %v", ErrBadInput, err))
			return
		}
	}
	n := 0
	for i, sol := range in.Solutions {
		sol.ID, sol.Workspace = "", p.WS
		saved, err := h.src.SaveSolution(r.Context(), s.p, sol)
		if err == nil && sol.Wrong != nil {
			// A solution exported with its mark stays marked: an import
			// never brings back what a person judged wrong.
			err = h.src.MarkSolution(r.Context(), s.p, p.WS, saved.ID, true, sol.Wrong.Note)
		}
		if err != nil {
			if errors.Is(err, ErrBadInput) {
				err = fmt.Errorf("%w: solution %d: %s (the %d before it were imported)", ErrBadInput, i+1,
					strings.TrimPrefix(err.Error(), ErrBadInput.Error()+": "), n)
			}
			h.fail(w, r, p, err)
			return
		}
		n++
	}
	back(w, r, p, "/ui/solutions", fmt.Sprintf("Imported %d solutions.", n))
}

type fixesData struct {
	Fixes  []store.Fix
	Labels map[string]store.Conversation // of the conversations fixes were learned in
}

func (h *Handler) fixes(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	fx, err := h.src.Fixes(r.Context(), p.WS, p.Proj)
	if err != nil {
		h.fail(w, r, p, err)
		return
	}
	p.Title = "Learned fixes"
	p.Message = r.FormValue("done")
	var ids []string
	for _, f := range fx {
		ids = append(ids, f.Session)
	}
	p.Data = fixesData{Fixes: fx, Labels: h.labels(r.Context(), p, nil, ids...)}
	h.render(w, http.StatusOK, "fixes", p)
}

func (h *Handler) deleteFix(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	if err := h.src.DeleteFix(r.Context(), p.WS, p.Proj, r.PathValue("id")); err != nil {
		h.fail(w, r, p, err)
		return
	}
	back(w, r, p, "/ui/fixes", "Learned fix deleted.")
}

// markFix marks a learned fix wrong (with the form's note) or clears its
// mark.
func (h *Handler) markFix(wrong bool) func(http.ResponseWriter, *http.Request, *session, *page) {
	return func(w http.ResponseWriter, r *http.Request, s *session, p *page) {
		if err := h.src.MarkFix(r.Context(), p.WS, p.Proj, r.PathValue("id"), wrong, r.FormValue("note")); err != nil {
			h.fail(w, r, p, err)
			return
		}
		done := "Fix marked wrong: it is kept, and no agent is shown it."
		if !wrong {
			done = "Mark removed: the fix is shown again."
		}
		back(w, r, p, "/ui/fixes", done)
	}
}

type liveData struct {
	Rows   []incidentRow
	Since  int64 // Unix microseconds of the newest row, where the stream starts
	Events string
}

// live shows the newest incidents; its script adds new ones as they come.
func (h *Handler) live(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	page, pats, err := h.src.Incidents(r.Context(), store.IncidentFilter{Workspace: p.WS, Project: p.Proj, Limit: 20})
	if err != nil {
		h.fail(w, r, p, err)
		return
	}
	d := liveData{Rows: rows(page.Incidents, pats, h.labels(r.Context(), p, page.Incidents)), Since: h.opts.Now().UnixMicro()}
	if len(page.Incidents) > 0 {
		d.Since = page.Incidents[0].Time.UnixMicro()
	}
	d.Events = "/ui/live/events?" + string(p.Tenant) + "&since=" + strconv.FormatInt(d.Since, 10)
	p.Title = "Live"
	p.Data = d
	h.render(w, http.StatusOK, "live", p)
}

// liveEvents streams the tenant's new incidents as server-sent events,
// each an "incident" event whose data is its table row. It asks the store
// for the tenant's version every LivePoll and reads the new incidents
// when it moves. since (Unix microseconds) is where it starts, at most an
// hour back; rows at that instant may be sent again (the page skips rows
// it has).
func (h *Handler) liveEvents(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	ctx := r.Context()
	now := h.opts.Now()
	since := now
	if v, err := strconv.ParseInt(r.FormValue("since"), 10, 64); err == nil {
		since = time.UnixMicro(v)
		if since.Before(now.Add(-time.Hour)) {
			since = now.Add(-time.Hour)
		}
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 3000\nevent: ready\ndata: \n\n")
	if err := rc.Flush(); err != nil {
		return
	}
	sent := map[string]bool{}
	version := int64(-1)
	tick := time.NewTicker(h.opts.LivePoll)
	defer tick.Stop()
	idle := 0
	for {
		v, err := h.src.Version(ctx, p.WS, p.Proj)
		if err == nil && v != version {
			version = v
			page, pats, err := h.src.Incidents(ctx, store.IncidentFilter{Workspace: p.WS, Project: p.Proj, Since: since, Limit: 100})
			if err == nil {
				list := rows(page.Incidents, pats, h.labels(ctx, p, page.Incidents))
				for i := len(list) - 1; i >= 0; i-- { // oldest first
					row := list[i]
					if sent[row.ID] {
						continue
					}
					var buf bytes.Buffer
					if err := h.pages["live"].ExecuteTemplate(&buf, "row", rowView{row, p.Tenant}); err != nil {
						h.log.Error("ui: render live row", "err", err)
						return
					}
					fmt.Fprint(w, "event: incident\n")
					for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
						fmt.Fprintf(w, "data: %s\n", line)
					}
					fmt.Fprint(w, "\n")
					if row.Time.After(since) {
						since = row.Time
						clear(sent)
					}
					sent[row.ID] = true
					idle = 0
				}
			}
		}
		if idle++; idle*int(h.opts.LivePoll/time.Millisecond) >= 15000 {
			fmt.Fprint(w, ": keep-alive\n\n")
			idle = 0
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-h.done:
			return
		case <-tick.C:
		}
	}
}
