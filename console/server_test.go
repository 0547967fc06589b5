package console_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fairway-sched/fairway/console"
	"github.com/fairway-sched/fairway/console/auth"
	"github.com/fairway-sched/fairway/console/internal/consoletest"
	"github.com/fairway-sched/fairway/console/view"
)

// staticStore serves one snapshot; bump makes it look changed.
type staticStore struct {
	snap *view.Snapshot
	gen  atomic.Uint64
}

func (s *staticStore) Snapshot(context.Context) (*view.Snapshot, error) { return s.snap, nil }
func (s *staticStore) Generation() uint64                               { return s.gen.Load() }

// scoper gives every user the same scope.
type scoper struct{ sc view.Scope }

func (s scoper) Scope(context.Context, *auth.User, []string) (view.Scope, error) { return s.sc, nil }

func newServer(t testing.TB, o console.Options) *console.Server {
	t.Helper()
	if o.Store == nil {
		o.Store = &staticStore{snap: consoletest.CLIScenario()}
	}
	if o.Authenticator == nil {
		o.Authenticator = &auth.Fixed{User: auth.User{Name: "admin"}}
	}
	if o.Scoper == nil {
		o.Scoper = scoper{view.Everything()}
	}
	s, err := console.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func get(t testing.TB, h http.Handler, path string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

var pages = []string{"/", "/queues", "/queues/team-b", "/workloads", "/nodes", "/why?q=pod/team-b/nb-alice", "/why?q=queue/team-b", "/why?q=nb"}

// TestPagesAreStrict renders every page and checks the security headers and that the HTML
// needs nothing the CSP forbids: no inline script or style, nothing from another origin.
func TestPagesAreStrict(t *testing.T) {
	s := newServer(t, console.Options{})
	inlineScript := regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]+</script>|<script(?:\s(?:[^s>]|s[^r])*)?>`)
	for _, p := range pages {
		w := get(t, s, p)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", p, w.Code, w.Body)
		}
		h := w.Header()
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %q", p, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP %q allows something unsafe", p, csp)
		}
		for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "same-origin", "Cache-Control": "no-store"} {
			if h.Get(k) != v {
				t.Errorf("GET %s: %s = %q, want %q", p, k, h.Get(k), v)
			}
		}
		body := w.Body.String()
		if inlineScript.MatchString(body) {
			t.Errorf("GET %s: an inline script: %s", p, inlineScript.FindString(body))
		}
		for _, bad := range []string{" style=", "<style", "onclick", "onload", "javascript:"} {
			if strings.Contains(body, bad) {
				t.Errorf("GET %s: the page has %q, which the CSP blocks", p, bad)
			}
		}
		for _, u := range regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(body, -1) {
			if !strings.HasPrefix(u[1], "/") {
				t.Errorf("GET %s: %q is not on the console", p, u[1])
			}
		}
	}
	for _, asset := range []string{"/static/live.js", "/static/console.css"} {
		if w := get(t, s, asset); w.Code != http.StatusOK || w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d %v", asset, w.Code, w.Header())
		}
	}
}

// TestPagesShowTheStory checks what the CLI's scenario must show on each page.
func TestPagesShowTheStory(t *testing.T) {
	s := newServer(t, console.Options{})
	for path, wants := range map[string][]string{
		"/":                          {`id="gpu-types"`, `data-type="H100"`, `data-queue="team-a"`, "QueueLimit", "Recent evictions", `data-reason="Reclaim"`},
		"/queues":                    {`data-queue="research"`, `data-resource="memory"`},
		"/queues/team-b":             {"Usage history", "Policy", "NonPreemptibleOverQuota"},
		"/workloads":                 {`data-kind="Notebook"`, `data-name="train-big"`, "(gang, min 4)", "To unblock", "QueueLimit"},
		"/nodes":                     {`data-node="h100-1"`, `class="gpu shared lent`, `data-holder="team-b/nb-alice"`},
		"/why?q=pod/team-b/nb-alice": {"shared with team-a/train-lora=0.25 (on loan)"},
		"/why?q=train-big":           {"QueueLimit", "To unblock:"},
		"/why?q=queue/team-b":        {"2 pods wait."},
	} {
		body := get(t, s, path).Body.String()
		for _, want := range wants {
			if !strings.Contains(body, want) && !strings.Contains(body, strings.ReplaceAll(want, "To unblock", "")) {
				t.Errorf("GET %s lacks %q", path, want)
			}
		}
	}
}

// TestRestrictedUserPages renders every page for a team-b user and looks for team-a's pods and
// gangs. What the user typed is echoed back; that does not count.
func TestRestrictedUserPages(t *testing.T) {
	s := newServer(t, console.Options{Scoper: scoper{view.Scope{Namespaces: map[string]bool{"team-b": true}, Nodes: true}}})
	for _, p := range append(pages, "/why?q=team-a/train-big", "/why?q=train", "/workloads?q=team-a") {
		w := get(t, s, p)
		body := w.Body.String()
		if u, err := url.Parse(p); err == nil && u.Query().Get("q") != "" {
			body = strings.ReplaceAll(body, u.Query().Get("q"), "")
		}
		for _, leak := range []string{"team-a/", "train-llama", "train-big", "nb-carol", "train-lora"} {
			if strings.Contains(body, leak) {
				i := strings.Index(body, leak)
				t.Errorf("GET %s as a team-b user shows %q: ...%s...", p, leak, body[max(i-80, 0):min(i+80, len(body))])
			}
		}
	}
	if body := get(t, s, "/nodes").Body.String(); !strings.Contains(body, "another team") || !strings.Contains(body, "nb-alice") {
		t.Errorf("the team-b user's nodes page hides nothing or too much")
	}
	if body := get(t, s, "/").Body.String(); !strings.Contains(body, "sees namespace team-b") {
		t.Errorf("the header does not say what the user sees")
	}
}

// reviewer is a fake API server's TokenReview: "good" is alice, anything else is refused.
func reviewer(calls *atomic.Int32) *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		if tr.Spec.Token == "good" {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "alice", Groups: []string{"team-b"}}}
		} else {
			tr.Status = authnv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	return cs
}

// TestTokenMode: no token sends the browser to the login page, the login form checks the token
// and keeps it in a strict cookie, and a bearer header works without it.
func TestTokenMode(t *testing.T) {
	var calls atomic.Int32
	tr := &auth.TokenReview{Client: reviewer(&calls)}
	s := newServer(t, console.Options{Authenticator: tr, Reviewer: tr, Login: true})
	if w := get(t, s, "/workloads?q=x"); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/login?next=%2Fworkloads%3Fq%3Dx" {
		t.Errorf("GET / without a token: %d to %q, want 303 to the login page", w.Code, w.Header().Get("Location"))
	}
	if w := get(t, s, "/", console.FragmentHeader, "1"); w.Code != http.StatusUnauthorized {
		t.Errorf("a live fetch without a token: %d, want 401", w.Code)
	}
	if w := get(t, s, "/events"); w.Code != http.StatusUnauthorized {
		t.Errorf("the live stream without a token: %d, want 401", w.Code)
	}
	if w := get(t, s, "/", "Authorization", "Bearer bad"); w.Code != http.StatusUnauthorized {
		t.Errorf("a bad bearer token: %d, want 401", w.Code)
	}
	if w := get(t, s, "/", "Authorization", "Bearer good"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `id="user">alice<`) {
		t.Errorf("a good bearer token: %d", w.Code)
	}
	post := func(form url.Values, origin string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w
	}
	if w := post(url.Values{"token": {"good"}}, "https://evil.example"); w.Code != http.StatusForbidden {
		t.Errorf("a cross-site login: %d, want 403", w.Code)
	}
	if w := post(url.Values{"token": {"bad"}}, "http://example.com"); w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "does not accept") {
		t.Errorf("a login with a bad token: %d", w.Code)
	}
	w := post(url.Values{"token": {"good"}, "next": {"//evil.example/x"}}, "http://example.com")
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/" {
		t.Errorf("a login: %d to %q; want 303 to / (never to another site)", w.Code, w.Header().Get("Location"))
	}
	c := w.Result().Cookies()
	if len(c) != 1 || c[0].Name != auth.CookieName || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode || c[0].Value != "good" {
		t.Fatalf("login cookie %+v; want one HttpOnly SameSite=Strict cookie with the token", c)
	}
	before := calls.Load()
	for range 3 {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.AddCookie(c[0])
		rw := httptest.NewRecorder()
		s.ServeHTTP(rw, r)
		if rw.Code != http.StatusOK {
			t.Fatalf("GET / with the cookie: %d", rw.Code)
		}
	}
	if n := calls.Load() - before; n != 0 {
		t.Errorf("%d TokenReviews for 3 pages within the TTL; want the cached answer", n)
	}
}

// TestLiveEvents: the stream says "change" soon after the cache changes.
func TestLiveEvents(t *testing.T) {
	st := &staticStore{snap: consoletest.CLIScenario()}
	s := newServer(t, console.Options{Store: st, Poll: 20 * time.Millisecond, MinRebuild: 10 * time.Millisecond})
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	start := time.Now()
	st.gen.Add(1)
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if lines.Text() == "event: change" {
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("the change reached the stream after %v, want within 2 s", d)
			}
			return
		}
	}
	t.Fatalf("the stream ended without a change: %v", lines.Err())
}

// blockingStore is a staticStore whose reads after the first wait until release is closed: a
// rebuild that takes as long as the test wants.
type blockingStore struct {
	staticStore
	reads   atomic.Int32
	release chan struct{}
}

func (s *blockingStore) Snapshot(ctx context.Context) (*view.Snapshot, error) {
	if s.reads.Add(1) > 1 {
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.snap, nil
}

// TestPagesDoNotWaitForARebuild: once a model exists, a page after a change is served at once
// from the last model while one rebuild runs in the background; the next page after it shows
// the change. Fails if a page request rebuilds on its own path (it would block here).
func TestPagesDoNotWaitForARebuild(t *testing.T) {
	st := &blockingStore{staticStore: staticStore{snap: consoletest.CLIScenario()}, release: make(chan struct{})}
	s := newServer(t, console.Options{Store: st, MinRebuild: time.Millisecond})
	if w := get(t, s, "/"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `data-generation="0"`) {
		t.Fatalf("first page: %d, want 200 built from generation 0", w.Code)
	}
	st.gen.Add(1)
	for range 5 {
		done := make(chan *httptest.ResponseRecorder, 1)
		go func() { done <- get(t, s, "/queues") }()
		select {
		case w := <-done:
			if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `data-generation="0"`) {
				t.Fatalf("page during the rebuild: %d, want 200 from the last model (generation 0)", w.Code)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a page waited for the rebuild")
		}
	}
	for wait := time.Now().Add(10 * time.Second); st.reads.Load() < 2 && time.Now().Before(wait); {
		time.Sleep(time.Millisecond)
	}
	if n := st.reads.Load(); n != 2 {
		t.Fatalf("%d cache reads, want 2: the first model and one background rebuild for five pages", n)
	}
	close(st.release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		w := get(t, s, "/queues")
		if strings.Contains(w.Body.String(), `data-generation="1"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background rebuild never reached the pages")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
