package store

import "time"

// Token usage: what the providers said the answers cost, with their
// prompt cache, summed per tenant, conversation, provider, model and UTC
// hour. Each replica adds its counts (AddUsage), so the records are the
// whole gateway's.

// Usage is the tokens that the answers of one tenant's conversation, from
// one provider and model, used in one UTC hour: counts every AddUsage adds
// to.
type Usage struct {
	Workspace string `json:"workspace"`
	Project   string `json:"project"`
	// Conversation is the conversation's id ("c:…", or the session the
	// client named); "" for requests that belong to none.
	Conversation string    `json:"conversation,omitempty"`
	Provider     string    `json:"provider,omitempty"`
	Model        string    `json:"model,omitempty"`
	Hour         time.Time `json:"hour"` // the start of the UTC hour

	Requests   int64 `json:"requests"`           // answers that said their usage
	Input      int64 `json:"input_tokens"`       // every input token, cached ones included
	Output     int64 `json:"output_tokens"`      // output tokens
	CacheRead  int64 `json:"cache_read_tokens"`  // input tokens read from the prompt cache
	CacheWrite int64 `json:"cache_write_tokens"` // input tokens written to the prompt cache
}

// The groupings of a UsageQuery.
const (
	UsageByHour         = "hour"         // one record per hour: the tenant over time
	UsageByConversation = "conversation" // one per conversation
	UsageByModel        = "model"        // one per provider and model
)

// UsageQuery selects one tenant's usage records.
type UsageQuery struct {
	Workspace string // required
	Project   string // required
	// Conversation, when set, keeps only that conversation's records.
	Conversation string
	// Since and Until bound Hour: Since <= Hour < Until (zero: unbounded).
	Since, Until time.Time
	// By, when set, sums the records in groups: UsageByHour (Conversation,
	// Provider and Model left empty), UsageByConversation (Provider and
	// Model empty) or UsageByModel (Conversation empty); a group's Hour is
	// the latest of its records'. "" returns the records as stored.
	By string
	// Limit caps the records returned; 0 means 1000. Backends cap it at
	// MaxLimit.
	Limit int
}

// CacheHitRatio is the share of the input read from the prompt cache, in
// [0,1]; 0 when there was no input.
func (u Usage) CacheHitRatio() float64 {
	if u.Input <= 0 {
		return 0
	}
	return min(float64(u.CacheRead)/float64(u.Input), 1)
}

// Add adds v's counts to u's.
func (u *Usage) Add(v Usage) {
	u.Requests += v.Requests
	u.Input += v.Input
	u.Output += v.Output
	u.CacheRead += v.CacheRead
	u.CacheWrite += v.CacheWrite
}
