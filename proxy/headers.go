package proxy

// Headers of the answers to rewritten requests. The headers a client sends
// to name its tenant are the tenant package's (tenant.HeaderWorkspace...).
const (
	HeaderGuard    = "X-Scar-Guard"
	HeaderRecall   = "X-Scar-Recall"
	HeaderDegraded = "X-Scar-Degraded"
	HeaderProvider = "X-Scar-Provider"
	// HeaderConversation names the conversation a rewritten request
	// belongs to: its X-Scar-Session, else the name derived from its start
	// ("c:" and 16 hex digits). The memory API's session= takes it.
	HeaderConversation = "X-Scar-Conversation"
	// HeaderLoop says how the proxy escalated against a loop: "stop" when
	// the STOP block was injected, "hard-stop" when the turn also went out
	// with tools forbidden. Absent otherwise.
	HeaderLoop = "X-Scar-Loop"
)

// HeaderAgentSession is the header in which an agent names its own
// session (opencode): the run a request belongs to, when the client
// names no X-Scar-Session and the body none (see runOf).
const HeaderAgentSession = "X-Session-Id"
