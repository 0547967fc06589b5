package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// User is who a request comes from, as Kubernetes knows them.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// key identifies a user for the caches: name, uid, groups and extra together.
func (u *User) key() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", u.Name, u.UID, strings.Join(u.Groups, "\x00"))
	for k, v := range u.Extra {
		fmt.Fprintf(h, "\x00%s=%s", k, strings.Join(v, ","))
	}
	return string(h.Sum(nil))
}

// ErrNoCredentials is returned for a request that carries no identity at all: the console
// then asks for a token (token mode) or says the proxy sent none.
var ErrNoCredentials = errors.New("no credentials")

// ErrUnauthenticated is returned for credentials the API server (or the proxy check) refuses.
var ErrUnauthenticated = errors.New("not authenticated")

// Authenticator finds the user of a request.
type Authenticator interface {
	Authenticate(r *http.Request) (*User, error)
}

// CookieName is the cookie the login page keeps the user's token in.
const CookieName = "fairway-console-token"

// TokenReview authenticates bearer tokens with the API server's TokenReview API. The token
// comes from the Authorization header, else the login cookie. Reviews are cached for TTL by the
// token's hash.
type TokenReview struct {
	Client kubernetes.Interface
	// TTL is how long a review is believed (10 s when 0): a revoked token stops working
	// within it.
	TTL time.Duration
	// Audiences, when set, are the audiences the tokens must be for.
	Audiences []string
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]reviewed
}

type reviewed struct {
	user    *User
	err     error
	expires time.Time
}

// Token returns the request's bearer token: the Authorization header's, else the cookie's.
func Token(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if t, ok := strings.CutPrefix(h, "Bearer "); ok {
			return strings.TrimSpace(t)
		}
	}
	if c, err := r.Cookie(CookieName); err == nil {
		return c.Value
	}
	return ""
}

// Authenticate reviews the request's token.
func (t *TokenReview) Authenticate(r *http.Request) (*User, error) {
	tok := Token(r)
	if tok == "" {
		return nil, ErrNoCredentials
	}
	return t.Review(r.Context(), tok)
}

// Review checks one token.
func (t *TokenReview) Review(ctx context.Context, tok string) (*User, error) {
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	ttl := t.TTL
	if ttl == 0 {
		ttl = 10 * time.Second
	}
	k := sha256.Sum256([]byte(tok))
	t.mu.Lock()
	if t.cache == nil {
		t.cache = map[[32]byte]reviewed{}
	}
	if c, ok := t.cache[k]; ok && now().Before(c.expires) {
		t.mu.Unlock()
		return c.user, c.err
	}
	t.mu.Unlock()
	tr, err := t.Client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: tok, Audiences: t.Audiences}}, metav1.CreateOptions{})
	if err != nil {
		// Not cached: the API server may be back at the next request.
		return nil, fmt.Errorf("reviewing the token: %w", err)
	}
	var res reviewed
	if !tr.Status.Authenticated {
		res.err = fmt.Errorf("%w: the API server does not accept the token%s", ErrUnauthenticated, suffix(tr.Status.Error))
	} else {
		u := tr.Status.User
		res.user = &User{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: map[string][]string{}}
		for k, v := range u.Extra {
			res.user.Extra[k] = v
		}
	}
	res.expires = now().Add(ttl)
	t.mu.Lock()
	for key, c := range t.cache {
		if !now().Before(c.expires) {
			delete(t.cache, key)
		}
	}
	t.cache[k] = res
	t.mu.Unlock()
	return res.user, res.err
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// Proxy believes the user a fronting proxy asserts in request headers, when the request comes
// from one of the proxy's addresses. Behind it the console must not be reachable any other way
// (the chart's NetworkPolicy and a cluster-internal Service see to that).
type Proxy struct {
	// UserHeader names the user (X-Forwarded-User when empty); GroupsHeader their groups, comma
	// separated or repeated (X-Forwarded-Groups when empty).
	UserHeader, GroupsHeader string
	// Trusted are the proxy's addresses. A request from elsewhere is refused, headers or not.
	Trusted []netip.Prefix
}

// ParsePrefixes reads a list of CIDRs or addresses ("10.0.0.0/8", "127.0.0.1").
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: not an address or a CIDR (e.g. 10.0.0.0/8 or 127.0.0.1)", s)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Authenticate reads the asserted user of a request from a trusted proxy.
func (p *Proxy) Authenticate(r *http.Request) (*User, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read the peer address %q", ErrUnauthenticated, r.RemoteAddr)
	}
	addr = addr.Unmap()
	trusted := false
	for _, t := range p.Trusted {
		if t.Contains(addr) {
			trusted = true
			break
		}
	}
	if !trusted {
		return nil, fmt.Errorf("%w: %s is not a trusted proxy (--trusted-proxies)", ErrUnauthenticated, addr)
	}
	uh, gh := p.UserHeader, p.GroupsHeader
	if uh == "" {
		uh = "X-Forwarded-User"
	}
	if gh == "" {
		gh = "X-Forwarded-Groups"
	}
	name := strings.TrimSpace(r.Header.Get(uh))
	if name == "" {
		return nil, fmt.Errorf("%w: the proxy sent no %s header", ErrNoCredentials, uh)
	}
	u := &User{Name: name}
	for _, v := range r.Header.Values(gh) {
		for g := range strings.SplitSeq(v, ",") {
			if g = strings.TrimSpace(g); g != "" {
				u.Groups = append(u.Groups, g)
			}
		}
	}
	return u, nil
}

// Fixed is local mode: every request is the same user (`fairway console --kubeconfig`, which
// listens on the loopback interface only by default).
type Fixed struct{ User User }

// Authenticate returns the fixed user.
func (f *Fixed) Authenticate(*http.Request) (*User, error) { u := f.User; return &u, nil }
