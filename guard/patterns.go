package guard

import (
	"strings"

	"github.com/scarproxy/scarproxy/store"
)

// builtins is the pattern bank: the eight reference patterns, with their
// reference labels and fix texts, matching on status codes and incident
// types as well as on today's toolchain messages. The order is the order
// text matches are tried in: specific patterns first, the broad syntax and
// timeout patterns last (an ESM error is reported as a SyntaxError; it must
// be named ESM first). Regexes are matched case-insensitively.
var builtins = []PatternConfig{
	{
		Name: "ROUTE FACTORY EXPORT",
		Regex: alt(
			`\bfn\.apply is not a function`,
			`\broute file does not export a function`,
			`\bliveness check failed`,
			`\broute (?:file|module)s? (?:does not|doesn't|must|should) export`,
			`\brouter?s?[\w./-]* does not export a (?:factory )?function`,
			`\b(?:Router|app)\.use\(\) requires a middleware function`,
			`\bRoute\.(?:get|post|put|patch|delete|all|use)\(\) requires a callback function`,
			`\brequire\(\.\.\.\) is not a function`,
		),
		Fix: "Route files MUST export a factory function: `module.exports = function(app) { app.get(...) }`. NEVER export a raw Express Router.",
	},
	{
		Name: "BANNED CALL EXHAUSTION",
		Regex: alt(
			`\bguardian rejection`,
			`\bbanned (?:call|function|api|module|import)s?\b`,
			`\bforbidden (?:execution|call|function|api)s?\b`,
			`\bforbidden by (?:the )?security polic(?:y|ies)`,
			`\b(?:eval|exec|execSync|child_process(?:\.exec(?:Sync)?)?|os\.system)(?:\(\))?\s+(?:calls?\s+)?(?:is\s+|are\s+)?(?:not allowed|forbidden|banned|disallowed|prohibited|blocked)\b`,
			`\b(?:use|usage|call)s? of (?:eval|exec|child_process\.exec)\b[^.\n]{0,40}\b(?:not allowed|forbidden|banned|disallowed|prohibited|blocked|detected)\b`,
			`\bno-(?:implied-)?eval\b`,
			`\bdetect-(?:child-process|eval-with-expression)\b`,
			`\bunsafe-eval\b`,
			`\bcode generation from strings disallowed`,
			`\beval can be harmful`,
			`\bB(?:102|307)\b`,
			`\bexec_used\b`,
		),
		Fix: "eval(), exec(), or child_process.exec() are forbidden by security policies. Use spawn() with explicit args instead.",
	},
	{
		Name: "PATH TRAVERSAL ATTEMPT",
		Regex: alt(
			`\bpath (?:traversal|sanitization)\b`,
			`\bdirectory traversal\b`,
			`\bpath escapes (?:from )?(?:the )?(?:parent|root|workspace|project|sandbox)`,
			`\boutside (?:of )?(?:the )?(?:allowed |project |workspace |working |sandbox |base |root )?(?:director(?:y|ies)|root|folder|workspace|project|sandbox)\b`,
			`\bnot (?:in|within|under|inside) (?:the |any )?(?:allowed|project|workspace|sandbox) (?:director(?:y|ies)|root|folder|paths?)\b`,
			`\bis not in the subpath of\b`,
			`\babsolute paths? (?:are |is )?not (?:allowed|permitted)`,
			`(?:\bparent directory|\.\.) (?:references? |segments? |components? )?(?:are |is )?not (?:allowed|permitted)`,
			`\bpath must be relative\b`,
			`\bunsafe path\b`,
		),
		Fix: "No `..` or absolute paths. Always relative-to-projectRoot. Validate with path.resolve + startsWith check.",
	},
	{
		Name: "INVALID SEARCH/REPLACE DIFF",
		Regex: alt(
			`\bsearch block did not match`,
			`\bsearch\b[^\n]{0,40}\breplace\b[^\n]{0,40}\binvalid\b`,
			`\bsearch(?:/replace)? block\b[^\n]{0,80}(?:failed to (?:exactly )?match|did not (?:exactly )?match|does not match|didn't match|not found)`,
			`\bSearchReplaceNoExactMatch\b`,
			`\bold_str(?:ing)?\b[^\n]{0,160}(?:not found|did not appear verbatim|is not unique|not unique)`,
			`\bstring to replace (?:was )?not found`,
			`\bfound \d+ matches of the string to replace`,
			`\bno replacement was performed`,
			`\bdoes not match anything in the file`,
			`\bno sufficiently similar match found`,
			`\bfailed to find (?:expected lines|context|the search text|matching lines)`,
			`\bcould not find (?:the )?(?:search|old|original|exact) (?:text|string|block|content|lines)`,
			`\bhunk #?\d+ failed`,
			`\bpatch (?:does not|doesn't) apply`,
			`\berror: patch failed`,
			`\b(?:corrupt|malformed) patch`,
		),
		Fix: "The SEARCH block must match the target file exactly. Double check whitespace and line endings, or use empty SEARCH blocks.",
	},
	{
		Name: "ESM IMPORT IN COMMONJS",
		Regex: alt(
			`\besm import`,
			`\besmodule[^\n]{0,80}\.js file`,
			`\bcannot use import statement outside a module`,
			`\bcannot use import\b`,
			`\bERR_REQUIRE_(?:ESM|ASYNC_MODULE)\b`,
			`\brequire\(\) of ES Module`,
			`\bmust use import to load ES Module`,
			`\b(?:require|module|exports|__dirname|__filename) is not defined in ES module scope`,
			`\bunexpected token '(?:export|import)'`,
			`\bcannot use 'import\.meta' outside a module`,
			`\bto load an ES module, set "type": "module"`,
			`\bis a CommonJS module, which may not support all module\.exports as named exports`,
			`\bTS1479\b`,
			`\bis an ECMAScript module and cannot be imported with 'require'`,
		),
		Fix: "This file runs in a CommonJS project. Use `const x = require(...)` and `module.exports = x`. Do NOT use `import` / `export` syntax.",
	},
	{
		Name:        "API RATE LIMIT TRIGGER",
		StatusCodes: []int{429},
		Regex: alt(
			// "rate limit reached/exceeded", but not "rate limiting middleware failed".
			`\brate[ _-]?limits?\s+(?:reached|exceeded|hit|error)`,
			`\bexceed(?:s|ed|ing)?\s+(?:the\s+|your\s+|its\s+)?(?:\w+\s+){0,2}rate[ _-]?limits?\b`,
			`\brate[ _-]?limited\b`,
			`\brate_limit_(?:exceeded|error)\b`,
			`\bRateLimit(?:Error|Exceeded)\b`,
			`\bThrottlingException\b`,
			`\brate exceeded\b`,
			`\brequests? (?:was|were|has been|have been) throttled\b`,
			`\btoo many requests\b`,
			`\bquota (?:exceeded|exhausted)`,
			`\bexceeded (?:your |the )?(?:current )?quota\b`,
			`\binsufficient_quota\b`,
			`\bRESOURCE_EXHAUSTED\b`,
			`\bresource has been exhausted\b`,
			`\b429 (?:status|too many)`,
			`\bstatus(?: code)?[ :=]+429\b`,
			`\bHTTP(?:/[\d.]+)? 429\b`,
		),
		Fix: "Provider is currently rate-limited. Wait or adjust model chains to route to cheaper/local providers first.",
	},
	{
		Name: "SYNTAX COMPLIANCE ERROR",
		Regex: alt(
			`\bsyntax check failed`,
			`\bunexpected end of (?:input|file|JSON input)\b`,
			`\bunexpected token\b`,
			`\b(?:SyntaxError|IndentationError|TabError|JSONDecodeError|YAMLException)\b`,
			`\bsyntax error\b`,
			`\bpars(?:e|ing) error\b`,
			// TypeScript syntax diagnostics (TS1005 "';' expected", TS1128, ...).
			`\bTS(?:1002|1003|1005|1009|1011|1109|1110|1126|1127|1128|1131|1134|1135|1136|1137|1141|1144|1160|1161|1381|1382|1434)\b`,
			`'[^'\s]{1,3}' expected\b`,
			`\bexpected '[^'\s]{1,3}'(?:,| before| after| at end of input| found| or)`,
			`\bexpected (?:unqualified-id|primary-expression|declaration|identifier|initializer|type-specifier|class-name)\b`,
			"\\bexpected one of [`']",
			`\b(?:unclosed|mismatched closing|unexpected closing) delimiter\b`,
			`\bunterminated (?:string|template|regular expression|regexp|comment|quoted)`,
			`\bmissing \) after argument list\b`,
			`\bwas never closed\b`,
			`\bexpected an indented block\b`,
			`\bunexpected indent\b`,
			`\bunindent does not match\b`,
			`\bExpecting (?:property name enclosed in double quotes|'[,:]' delimiter|value)\b`,
			`\binvalid character '.{1,4}' (?:looking for|after|in)\b`,
			`\bdid not find expected (?:key|node content|'-' indicator)\b`,
			`\bmapping values are not allowed\b`,
			`\bcould not find expected ':'`,
			`\breached end of file while parsing\b`,
			`\billegal start of (?:expression|type)\b`,
			// MySQL's 1064 and its SQLSTATE class.
			`\berror in your SQL syntax\b`,
			`\bsyntax error or access violation\b`,
		),
		// An HTML error page parsed as JSON is the server's failure, not the
		// agent's syntax.
		Exclude: alt(
			`\bunexpected token\s*'?<'?,?\s*(?:in JSON|"<)`,
			`<!doctype html`,
			`\binvalid character '<' looking for beginning of value`,
			`\bline 1 column 1 \(char 0\)`,
			`\bin JSON at position 0\b`,
		),
		Fix: "Output must be valid syntax. Verify braces, brackets, parentheses, and commas. Never truncate output mid-block.",
	},
	{
		Name:        "REQUEST TIMEOUT EXPIRED",
		StatusCodes: []int{408, 504, 524},
		Types:       []string{store.TypeTimeout},
		Regex: alt(
			// Word boundaries keep "setTimeout is not defined" out.
			`\btime[ -]?out\b`,
			`\btimed[ -]out\b`,
			`Timeout(?:Error|Exception)\b`,
			`\b(?:Read|Connect|Write|Pool)Timeout\b`,
			`\bdeadline[ _]exceeded\b`,
			`\bE(?:SOCKET)?TIMEDOUT\b`,
			`_TIMEOUT\b`, // undici UND_ERR_HEADERS_TIMEOUT, ...
			`\brequest exceeded \d+ ?s`,
			`\btook too long\b`,
			`\bexceeded (?:the )?(?:maximum |max )?(?:time ?limit|timeout|execution time)\b`,
			`\bmaximum execution time of [^\n]{1,20} exceeded`,
			`\bgateway time-?out\b`,
		),
		// A timeout that is only named (a property, an option) is not one.
		Exclude: alt(
			`\(reading '[^'\n]*'\)`,
			`\b(?:unknown|invalid|unrecogni[sz]ed|unsupported) (?:option|argument|flag|parameter|field|property|key)s?\b[^\n]{0,40}time[ -]?out`,
			`\btime[ -]?out\b[^\n]{0,20}\b(?:must be|should be|is not a valid|expects?)\b`,
		),
		Fix: "Inference took too long. Reduce output tokens size or request complexity. Check provider status.",
	},
}

// alt joins regex alternatives.
func alt(parts ...string) string {
	return strings.Join(parts, "|")
}
