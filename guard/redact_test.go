package guard

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestRedact(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"openai key", "invalid key sk-abc123DEF456ghi789JKL0 given", "invalid key [REDACTED] given"},
		{"openai project key", "key=sk-proj-Ab1_cD2-eF3gH4iJ5kL6mN7oP8 rejected", "key=[REDACTED] rejected"},
		{"anthropic key", "x-api-key: sk-ant-api03-AbCdEf0123456789_xyz", "x-api-key: [REDACTED]"},
		{"sk word is not a key", "install scikit: pip install sk-learn-compatible-estimators", "install scikit: pip install sk-learn-compatible-estimators"},
		{"bearer", "Authorization failed for Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc", "Authorization failed for Bearer [REDACTED]"},
		{"authorization header", `curl -H "Authorization: Bearer abc.def.ghi123" https://x`, `curl -H "Authorization: [REDACTED]" https://x`},
		{"bearer word kept", "Bearer authentication required", "Bearer authentication required"},
		{"aws key id", "using AKIAIOSFODNN7EXAMPLE in us-east-1", "using [REDACTED] in us-east-1"},
		{"password=", "connect failed: host=db password=hunter2 user=app", "connect failed: host=db password=[REDACTED] user=app"},
		{"api_key=", "GET /v1?api_key=abcd1234&q=x failed", "GET /v1?api_key=[REDACTED]&q=x failed"},
		{"token=", "token=tok_live_123 expired", "token=[REDACTED] expired"},
		{"json api_key", `{"api_key": "abc\"def", "model": "gpt-4o"}`, `{"api_key": "[REDACTED]", "model": "gpt-4o"}`},
		{"json access_token", `{"access_token":"ya29.a0Af","expires_in":3599}`, `{"access_token":"[REDACTED]","expires_in":3599}`},
		{"max_tokens untouched", `{"max_tokens": 100, "tokens=": 1}`, `{"max_tokens": 100, "tokens=": 1}`},
		{"yaml password", "password: s3cr3t!", "password: [REDACTED]"},
		{"url credentials", "dial postgres://app:pa55w0rd@db:5432/x failed", "dial postgres://app:[REDACTED]@db:5432/x failed"},
		{"github token", "push rejected for ghp_abcdefghijklmnopqrstuvwxyz0123456789", "push rejected for [REDACTED]"},
		{"github pat", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "[REDACTED]"},
		{"private key", "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----\nafter", "key:\n[REDACTED]\nafter"},
		{"truncated private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk", "[REDACTED]"},
		{"nothing secret", "SyntaxError: invalid syntax (line 3)", "SyntaxError: invalid syntax (line 3)"},

		// JWTs.
		{"jwt alone", "token eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwiaWF0IjoxNTE2MjM5MDIyfQ.NHVaYe26MbtOYhSKkoKYdFVomg4i8ZJd8_-RU8VNbftc4TSMb4bXP3l3YlNWACwyXPGffz5aXHc6lty1Y2t4SWRqGteragsVdZufDn5BlnJl9pdR_kdVFUsra2rWKEofkZeIC4yWytE58sMIihvo9H1ScmmVwBcQP6XETqYd0aSHp1gOa9RdUPDvoXQ5oqygTqVtxaDr6wUFKrKItgBMzWIdNZ6y7O9E0DhEPTbE9rfBo6KTFsHAZnMg4k68CDp2woYIaXbmYTWcvbzIuHO7_37GT79XdIwkm95QJ7hYC9RiwrV7mesbY4PAahERJawntho0my942XheVLmGwLMBkQ in the log", "token [REDACTED] in the log"},
		{"jwt in an authorization header", `{"Authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"}`, `{"Authorization": "[REDACTED]"}`},
		{"unsigned jwt", "got eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9. back", "got [REDACTED] back"},

		// Vendor tokens.
		{"gitlab pat", "git clone https://oauth2:glpat-AbCdEf123456ghIJkl78@gitlab.com/acme/shop.git", "git clone https://oauth2:[REDACTED]@gitlab.com/acme/shop.git"},
		{"gitlab pat alone", "export GITLAB_PAT glpat-xY9kLmN0pQrStUvWz1a2", "export GITLAB_PAT [REDACTED]"},
		{"gitlab deploy token", "gldt-4kQx8mN2pR6sT0vW3yZ5 expired", "[REDACTED] expired"},
		{"hugging face", "HfHubHTTPError: 401 for token hf_aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH", "HfHubHTTPError: 401 for token [REDACTED]"},
		{"npm", "//registry.npmjs.org/:_authToken npm_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "//registry.npmjs.org/:_authToken [REDACTED]"},
		{"slack bot", "posting with xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx failed", "posting with [REDACTED] failed"},
		{"slack user", "xoxp-123456789012-123456789012-123456789012-0123456789abcdef0123456789abcdef", "[REDACTED]"},
		{"slack app-level and legacy", "xoxa-2-1234567890-abcdef and xoxs-1234567890-abcdef and xapp-1-A0123456789-1234567890123-abcdef0123", "[REDACTED] and [REDACTED] and [REDACTED]"},
		{"slack refresh", "xoxe.xoxp-1-Mi0yLTEyMzQ1Njc4OTAx", "[REDACTED]"},
		{"slack webhook", "curl -X POST https://hooks.slack.com/services/T0123ABCD/B0456EFGH/aBcDeFgHiJkLmNoPqRsTuVwX -d @msg.json", "curl -X POST https://hooks.slack.com/services/[REDACTED] -d @msg.json"},
		{"discord webhook", "https://discord.com/api/webhooks/123456789012345678/AbC-dEf_GhI", "https://discord.com/api/webhooks/[REDACTED]"},

		// AWS.
		{"aws secret by name", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = [REDACTED]"},
		{"aws secret env", "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY && aws s3 ls", "export AWS_SECRET_ACCESS_KEY=[REDACTED] && aws s3 ls"},
		{"aws secret json", `{"AccessKeyId": "AKIAIOSFODNN7EXAMPLE", "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}`, `{"AccessKeyId": "[REDACTED]", "SecretAccessKey": "[REDACTED]"}`},
		{"aws secret after key id", "Access key ID,Secret access key\nAKIAIOSFODNN7EXAMPLE,wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n", "Access key ID,Secret access key\n[REDACTED],[REDACTED]\n"},
		{"aws secret after key id, spaced", "using AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY now", "using [REDACTED] [REDACTED] now"},
		{"aws key id then 41 chars", "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEYX", "[REDACTED] wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEYX"},

		// Azure.
		{"azure connection string", "DefaultEndpointsProtocol=https;AccountName=shopdata;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;EndpointSuffix=core.windows.net", "DefaultEndpointsProtocol=https;AccountName=shopdata;AccountKey=[REDACTED];EndpointSuffix=core.windows.net"},
		{"azure service bus", "Endpoint=sb://shop.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=3fV2bD9nQ+1kZ0x7yW4uT6sR8pO5mN2lK1jH0gF9eD8=", "Endpoint=sb://shop.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=[REDACTED]"},
		{"azure sas", "GET https://shop.blob.core.windows.net/c/a.csv?sv=2022-11-02&se=2024-05-01&sp=r&sig=Zm9vYmFyJTJCYmF6%3D failed", "GET https://shop.blob.core.windows.net/c/a.csv?sv=2022-11-02&se=2024-05-01&sp=r&sig=[REDACTED] failed"},

		// Command lines.
		{"--password space", "pg_dumpall --username admin --password hunter2 --host db", "pg_dumpall --username admin --password [REDACTED] --host db"},
		{"--password equals", "mysql --user=root --password=s3cr3t shop", "mysql --user=root --password=[REDACTED] shop"},
		{"--password quoted", `mysqldump --password "p@ss word" shop`, `mysqldump --password [REDACTED] shop`},
		{"--password then an option", "vault login --password --method=userpass", "vault login --password --method=userpass"},
		{"--password-file kept", "restic --password-file /run/secrets/restic backup", "restic --password-file /run/secrets/restic backup"},
		{"mysql glued", "mysql -u root -pS3cr3t! -h db shop", "mysql -u root -p[REDACTED] -h db shop"},
		{"mysqldump glued quoted", "mysqldump -uroot -p'my pass' shop > dump.sql", "mysqldump -uroot -p[REDACTED] shop > dump.sql"},
		{"mysql -p db asks for a password", "mysql -u root -p shop", "mysql -u root -p shop"},
		{"mysql -p db then an option", "mysql -u root -p shop -e 'select 1'", "mysql -u root -p shop -e 'select 1'"},
		{"mysql -p db < file", "mysql -p shop < dump.sql", "mysql -p shop < dump.sql"},
		{"mysql -p password db", "mysql -u root -p hunter2 shop", "mysql -u root -p [REDACTED] shop"},
		{"mysql after an agent's Command:", "Command: mysql -h db -p hunter2 shop\nDirectory: (root)", "Command: mysql -h db -p [REDACTED] shop\nDirectory: (root)"},
		{"mysql -P port", "mysql -h db -P 3306 shop", "mysql -h db -P 3306 shop"},
		{"mysql in prose", "Run mysql -p shop to connect; it asks for the password.", "Run mysql -p shop to connect; it asks for the password."},
		{"sshpass", "sshpass -p 'Tr0ub4dor&3' ssh deploy@web1 uptime", "sshpass -p [REDACTED] ssh deploy@web1 uptime"},
		{"docker login", "docker login -u ci -p dckr_pat_2b3e36beeb386dfdaacb9b46004ccb7c registry.example.com", "docker login -u ci -p [REDACTED] registry.example.com"},
		{"redis-cli -a, not -p", "redis-cli -h cache -p 6380 -a s3cr3t ping", "redis-cli -h cache -p 6380 -a [REDACTED] ping"},
		{"mysql at the start of a later line", "$ cd /srv\nmysql -u app -p hunter2 shop\n", "$ cd /srv\nmysql -u app -p [REDACTED] shop\n"},
		{"s3 presigned url", "GET https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=9a3f0c2b1d&X-Amz-Expires=900 403", "GET https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=[REDACTED]&X-Amz-Expires=900 403"},
		{"mongosh", "$ mongosh --host db -u app -p hunter2 shop", "$ mongosh --host db -u app -p [REDACTED] shop"},
		{"sshpass mid-sentence", "I ran sshpass -p hunter2 ssh deploy@web1 and it hung", "I ran sshpass -p [REDACTED] ssh deploy@web1 and it hung"},
		{"a password of quoted and bare pieces", `psql --password ''0 --host db; pg --passwd "pa ss"word2 -v`, `psql --password [REDACTED] --host db; pg --passwd [REDACTED] -v`},
		{"sshpass glued after an option", "then sshpass -v -pS3cr3t scp a.tgz web1:/srv", "then sshpass -v -p[REDACTED] scp a.tgz web1:/srv"},
		{"sshpass -f kept", "sshpass -f /run/secrets/pw ssh web1 -p 2222", "sshpass -f /run/secrets/pw ssh web1 -p 2222"},
		{"curl -u", "curl -s -u deploy:Tr0ub4dor https://api.example.com/v1/x failed", "curl -s -u deploy:[REDACTED] https://api.example.com/v1/x failed"},
		{"curl --user mid-sentence", "I retried with curl https://x.example --user=admin:hunter2 and got 401", "I retried with curl https://x.example --user=admin:[REDACTED] and got 401"},
		{"curl -u glued and quoted", `curl -u'ci:p@ss word' https://x`, `curl -u'ci:[REDACTED]' https://x`},
		{"curl -u user alone asks", "curl -u deploy https://api.example.com", "curl -u deploy https://api.example.com"},
		{"httpie -a", "the call http -a alice:s3cr3t GET api.example.com/me returned 403", "the call http -a alice:[REDACTED] GET api.example.com/me returned 403"},
		{"httpie --auth quoted", `https --auth "bob:pa ss" POST api.example.com`, `https --auth "bob:[REDACTED]" POST api.example.com`},
		{"http status and a time kept", "http 500 at 12:30, ls -a shows nothing", "http 500 at 12:30, ls -a shows nothing"},
		{"escaped json password", `{"log":"POST /login body={\"user\":\"ann\",\"password\":\"hunter2\"}"}`, `{"log":"POST /login body={\"user\":\"ann\",\"password\":\"[REDACTED]\"}"}`},
		{"escaped json token with escapes", `"{\"api_key\": \"a\\\"b\\\\c\\nd\", \"n\":1}"`, `"{\"api_key\": \"[REDACTED]\", \"n\":1}"`},

		// Passwords in URLs.
		{"url password with @", "dial postgres://user:p@ss@db:5432/shop failed", "dial postgres://user:[REDACTED]@db:5432/shop failed"},
		{"url password with @ and no path", `{"dsn":"postgres://user:p@ss@db","other":"a@b"}`, `{"dsn":"postgres://user:[REDACTED]@db","other":"a@b"}`},
		{"url password with :", "redis://default:pa:ss@cache:6379/0", "redis://default:[REDACTED]@cache:6379/0"},
		{"url empty user", "redis://:hunter2@cache:6379", "redis://:[REDACTED]@cache:6379"},
		{"url email as user", "https://me@example.com:pw@git.example.com/repo.git", "https://me@example.com:[REDACTED]@git.example.com/repo.git"},
		{"url without password", "https://user@host:8080/path?email=a@b.com", "https://user@host:8080/path?email=a@b.com"},
		{"url port and @ in the query", "http://localhost:8080/search?q=a@b", "http://localhost:8080/search?q=a@b"},

		// More names.
		{"django secret key", "SECRET_KEY=django-insecure-3k#x9!p2 DEBUG=True", "SECRET_KEY=[REDACTED] DEBUG=True"},
		{"comparison is not a secret", "if tok.ScanToken == scanner.EOF && password != \"\" {", "if tok.ScanToken == scanner.EOF && password != \"\" {"},
		{"go assignment is not a secret", "user, password := parseAuth(out)", "user, password := parseAuth(out)"},
		{"private key assignment in code", "cfg.Certificates[0].PrivateKey = key", "cfg.Certificates[0].PrivateKey = key"},
		{"passphrase", `{"passphrase": "correct horse"}`, `{"passphrase": "[REDACTED]"}`},

		// Left alone.
		{"git log hashes", "commit 3f2a9c1e5b7d4a8f9e0c1b2a3d4e5f6a7b8c9d0e\nMerge: 8e0c1b2 4a8f9e0\nAuthor: Dev <dev@example.com>", "commit 3f2a9c1e5b7d4a8f9e0c1b2a3d4e5f6a7b8c9d0e\nMerge: 8e0c1b2 4a8f9e0\nAuthor: Dev <dev@example.com>"},
		{"uuid", "request 123e4567-e89b-12d3-a456-426614174000 failed", "request 123e4567-e89b-12d3-a456-426614174000 failed"},
		{"sha256 digest", "sha256:5d1f0c3a9b8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a392817065f4e", "sha256:5d1f0c3a9b8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a392817065f4e"},
		{"40 base64 chars without a name", "checksum wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY ok", "checksum wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY ok"},
		{"identifiers sharing a prefix", "hf_hub_download npm_package_version npm_config_cache glpat- xoxo", "hf_hub_download npm_package_version npm_config_cache glpat- xoxo"},
		{"lower-case hf identifier", "hf_transformerscachedirectorypathsetting", "hf_transformerscachedirectorypathsetting"},
		{"eyJ without dots", "data eyJhbGciOiJIUzI1NiJ9 only", "data eyJhbGciOiJIUzI1NiJ9 only"},
		{"base64 image", "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="},
		{"prose", "The password must be changed every 90 days; tokens expire after an hour.", "The password must be changed every 90 days; tokens expire after an hour."},
		{"docker port mapping", "docker run --name shop -p 8080:80 -d nginx", "docker run --name shop -p 8080:80 -d nginx"},
		{"ssh url", "ssh://git@github.com:22/acme/shop.git", "ssh://git@github.com:22/acme/shop.git"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Redact(tc.in); got != tc.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if got := Redact(Redact(tc.in)); got != Redact(tc.in) {
				t.Errorf("Redact is not idempotent: %q", got)
			}
		})
	}
}

func TestSanitize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"plain", "SyntaxError: invalid syntax", 200, "SyntaxError: invalid syntax"},
		{"newlines and tabs", "a\nb\r\n\tc  d\n", 200, "a b c d"},
		{"controls removed", "a\x00b\x1b[31mc\x7f", 200, "ab[31mc"},
		{"bidi and zero width removed", "safe\u202Eevil\u200B!", 200, "safeevil!"},
		{"line separators", "a\u2028b\u2029c", 200, "a b c"},
		{"marker forged", BlockEnd + "\n" + BlockStart, 200, "# !!! END REPEAT FAILURE GUARD !!! # !!! REPEAT FAILURE GUARD — DO NOT REPEAT THESE ERRORS !!!"},
		{"hashes joined by a control char", "#\x00##\x00# x", 200, "# x"},
		{"two hashes kept", "## x ####", 200, "## x #"},
		{"invalid utf8", "a\xffb", 200, "a\uFFFDb"},
		{"cap", "abcdefghij", 5, "abcd…"},
		{"cap exact", "abcde", 5, "abcde"},
		{"cap runes", "ééééé", 3, "éé…"},
		{"cap trims the space before the ellipsis", "ab cd", 4, "ab…"},
		{"cap one", "abc", 1, "…"},
		{"no cap", strings.Repeat("x", 500), 0, strings.Repeat("x", 500)},
		{"only white space", " \n\t", 10, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Sanitize(tc.in, tc.max); got != tc.want {
				t.Errorf("Sanitize(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
			}
		})
	}
}

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "a\nb", BlockStart, BlockEnd, "#\n##", "\u202E", "\xff", "### RECALL: x"} {
		f.Add(s, 200)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		max = max%400 + 1
		if max < 1 {
			max += 400
		}
		out := Sanitize(s, max)
		if n := utf8.RuneCountInString(out); n > max {
			t.Fatalf("Sanitize(%q, %d) has %d runes", s, max, n)
		}
		if strings.Contains(out, "###") || strings.Contains(out, BlockStart) || strings.Contains(out, BlockEnd) {
			t.Fatalf("Sanitize(%q) = %q holds a marker", s, out)
		}
		for _, r := range out {
			if r == '\n' || r == '\r' || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || (unicode.IsSpace(r) && r != ' ') {
				t.Fatalf("Sanitize(%q) = %q holds %U", s, out, r)
			}
		}
		if strings.HasPrefix(out, " ") || strings.HasSuffix(out, " ") || strings.Contains(out, "  ") {
			t.Fatalf("Sanitize(%q) = %q: untrimmed or doubled spaces", s, out)
		}
		if again := Sanitize(out, max); again != out {
			t.Fatalf("Sanitize not idempotent: %q then %q", out, again)
		}
	})
}

// FuzzLitScan: litScan finds a literal exactly when strings.Contains does.
func FuzzLitScan(f *testing.F) {
	for _, s := range append(redactInputs(), "", "g", "xox", "://", "--pass", "authorization: bearer x", "hf_", "sig=", strings.Join(redactLits, "")) {
		f.Add(strings.ToLower(s))
	}
	f.Fuzz(func(t *testing.T, s string) {
		found := litScan(s)
		for i, l := range redactLits {
			if got, want := found&(1<<i) != 0, strings.Contains(s, l); got != want {
				t.Fatalf("litScan(%q) finds %q: %v, want %v", s, l, got, want)
			}
		}
	})
}

// FuzzRedact: redacting twice changes nothing more (a replacement never
// makes a new match).
func FuzzRedact(f *testing.F) {
	for _, s := range append(redactInputs(), "postgres://u:p@ss@h/db", "mysql -u root -p hunter2 shop", "AKIAIOSFODNN7EXAMPLE,wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"AccountKey=abc==;", "sshpass -p x ssh h", "xoxb-123456789012-abc", "--password 'a b'", "curl -u 'a:b c' -u d:e", `{\"token\":\"a\\\"b\"}`) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once := Redact(s)
		if twice := Redact(once); twice != once {
			t.Fatalf("Redact not idempotent:\n in   %q\n once %q\n twice %q", s, once, twice)
		}
	})
}

// FuzzRedactPrefilters: a text a rule matches always passes the rule's
// prefilters (its literals, in the text folded to lower case, and the
// separator of the key=value and key: value rules), whatever its
// alphabet: they only spare texts a rule cannot match.
func FuzzRedactPrefilters(f *testing.F) {
	for _, s := range append(redactInputs(), "db_password = x", "CLIENT_SECRET:\t'v'", "apikey=1", "Secret-Key: abc", "passphrase\n= z",
		"Tools: run_tests. Final answer: Tests pass.", "token == x", "x-api-key: y", "pa\u017f\u017fword=hunter2", "\u212aey: v", "api_\u212aEY: v",
		"Tools: a -> b … (+2 more steps). Final answer: Tests pass.", "Authorization: Bearer ey…", "sk-proj-ab12cd34ef56gh78ij90 ünïcode") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lower := foldLower(s)
		found := litScan(lower)
		for i := range redactions {
			r := &redactions[i]
			if !r.re.MatchString(s) {
				continue
			}
			if r.lits != nil && r.mask&found == 0 {
				t.Fatalf("%s matches %q but its literals %q are not in %q", r.name, s, r.lits, lower)
			}
			if r.sep != 0 && !keyFollowedBy(lower, r.lits, r.sep) {
				t.Fatalf("%s matches %q but its separator check rejects it", r.name, s)
			}
		}
	})
}
