package ui

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Wrong logins are slowed per client address with a token bucket: an
// address may fail loginBurst times at once, then once per loginRefill;
// past that its attempts are refused with 429 before the token is even
// checked, so guessing the admin token or a gateway key from one address
// runs at loginRefill's pace. A login that succeeds costs nothing.
const (
	loginBurst  = 10
	loginRefill = 6 * time.Second
	// loginAddrs bounds the addresses remembered: past it, those whose
	// bucket is full again are forgotten, then, if none is, all of them.
	loginAddrs = 10_000
)

// loginBucket is one address's allowance of wrong logins.
type loginBucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
	warned bool      // the refusal of this empty spell was logged
}

// loginLimiter keeps the buckets of the addresses that failed to log in.
type loginLimiter struct {
	mu      sync.Mutex
	buckets map[string]*loginBucket
}

// fill brings b's tokens up to date at now.
func (b *loginBucket) fill(now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(loginBurst, b.tokens+float64(d)/float64(loginRefill))
		b.at = now
	}
}

// allow reports whether addr may try a token at now, and when not, how
// long until it may, and whether this is the first refusal since its
// bucket ran out.
func (l *loginLimiter) allow(addr string, now time.Time) (ok bool, wait time.Duration, first bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[addr]
	if b == nil {
		return true, 0, false
	}
	b.fill(now)
	if b.tokens >= 1 {
		return true, 0, false
	}
	first, b.warned = !b.warned, true
	return false, time.Duration((1 - b.tokens) * float64(loginRefill)), first
}

// failed takes a token from addr's bucket at now and returns how many
// wrong logins the bucket has room for still.
func (l *loginLimiter) failed(addr string, now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[addr]
	if b == nil {
		if l.buckets == nil || len(l.buckets) >= loginAddrs {
			l.forget(now)
		}
		b = &loginBucket{tokens: loginBurst, at: now}
		l.buckets[addr] = b
	}
	b.fill(now)
	b.tokens = math.Max(0, b.tokens-1)
	if b.tokens >= 1 {
		b.warned = false
	}
	return int(b.tokens)
}

// forget drops the buckets that are full again at now, or, when none is,
// every bucket: memory stays bounded whatever the addresses.
func (l *loginLimiter) forget(now time.Time) {
	for addr, b := range l.buckets {
		b.fill(now)
		if b.tokens >= loginBurst {
			delete(l.buckets, addr)
		}
	}
	if l.buckets == nil || len(l.buckets) >= loginAddrs {
		l.buckets = make(map[string]*loginBucket)
	}
}

// retryAfter is a Retry-After header's value for wait: whole seconds,
// rounded up.
func retryAfter(wait time.Duration) string {
	return strconv.Itoa(int(math.Ceil(wait.Seconds())))
}

// clientAddr is the address a login's attempts are counted by: the
// connection's peer (a header naming another would be the client's to
// choose).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// fromThisSite reports whether a form was posted from the dashboard's own
// pages: a browser says where a form came from in Origin. None (a client
// that is not a browser, or an old one) is accepted; "null" (a sandboxed
// frame, a data: URL, a redirect from elsewhere) is not.
func fromThisSite(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	host := strings.TrimPrefix(strings.TrimPrefix(o, "http://"), "https://")
	return o != "null" && host == r.Host
}
