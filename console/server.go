package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/fairway-sched/fairway/console/auth"
	"github.com/fairway-sched/fairway/console/history"
	"github.com/fairway-sched/fairway/console/view"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Scoper finds what a user may see (auth.Authorizer).
type Scoper interface {
	Scope(ctx context.Context, u *auth.User, namespaces []string) (view.Scope, error)
}

// Options configure a Server.
type Options struct {
	Store         Store
	Authenticator auth.Authenticator
	Scoper        Scoper
	// Login is true in token mode: a request without a token is sent to the login page, whose
	// form checks the token with Reviewer and keeps it in a cookie.
	Login    bool
	Reviewer *auth.TokenReview
	// SecureCookie marks the login cookie Secure (the console is served over HTTPS, directly
	// or behind a proxy).
	SecureCookie bool
	// History charts queues' usage; nil shows no charts. HistorySource names it on the page.
	History       history.Source
	HistorySource string
	// LocalUser, in local mode, is who the console runs as (shown in the header).
	LocalUser string
	// MinRebuild is the least time between two rebuilds of the pages' model (500 ms when 0);
	// Poll how often the live stream looks for changes (250 ms when 0). A change shows in an
	// open page within Poll + MinRebuild + the rebuild and one fetch.
	MinRebuild, Poll time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	Log logr.Logger
}

// Server serves the console.
type Server struct {
	o     Options
	mux   *http.ServeMux
	pages map[string]*pageTemplate

	// buildMu lets one rebuild run at a time; building is true while a page's background
	// rebuild is queued or running, so a burst of requests starts one.
	buildMu  sync.Mutex
	building atomic.Bool

	mu      sync.Mutex
	model   *view.Model
	gen     uint64
	builtAt time.Time
}

// New builds a Server.
func New(o Options) (*Server, error) {
	if o.Store == nil || o.Authenticator == nil || o.Scoper == nil {
		return nil, errors.New("console: Store, Authenticator and Scoper are required")
	}
	if o.Login && o.Reviewer == nil {
		return nil, errors.New("console: Login needs a Reviewer")
	}
	if o.MinRebuild == 0 {
		o.MinRebuild = 500 * time.Millisecond
	}
	if o.Poll == 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{o: o, mux: http.NewServeMux()}
	var err error
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", staticHandler(static)))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	s.mux.HandleFunc("GET /login", s.loginPage)
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("POST /logout", s.logout)
	s.mux.HandleFunc("GET /events", s.events)
	s.mux.HandleFunc("GET /{$}", s.page("overview", s.overview))
	s.mux.HandleFunc("GET /queues", s.page("queues", s.queues))
	s.mux.HandleFunc("GET /queues/{name}", s.page("queue", s.queue))
	s.mux.HandleFunc("GET /workloads", s.page("workloads", s.workloads))
	s.mux.HandleFunc("GET /nodes", s.page("nodes", s.nodes))
	s.mux.HandleFunc("GET /why", s.page("why", s.why))
	return s, nil
}

// ServeHTTP serves every request with the console's security headers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// No inline script or style anywhere: scripts and styles come from the console's own
	// files; charts are inline SVG with presentation attributes only.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
	if s.o.SecureCookie || r.TLS != nil {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	s.mux.ServeHTTP(w, r)
}

// current returns the model a page is rendered from. Once a model exists, a page never waits
// for a rebuild: a rebuild at 1,000 nodes and 20,000 pods takes longer than the 50 ms a page
// may take (docs/console.md), so when the cache changed since the model was built, or the model
// is older than 30 s (ages and waits move on), the page is served from the model it has and a
// rebuild starts in the background; the live stream tells open pages when it is done. Only the
// first request, before any model, waits for one.
func (s *Server) current(ctx context.Context) (*view.Model, uint64, error) {
	s.mu.Lock()
	m, gen, stale := s.model, s.gen, s.staleLocked()
	s.mu.Unlock()
	if m == nil {
		if err := s.rebuild(ctx); err != nil {
			return nil, 0, err
		}
		return s.latest()
	}
	if stale && s.building.CompareAndSwap(false, true) {
		go func() {
			defer s.building.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.rebuild(ctx); err != nil {
				s.o.Log.Error(err, "Rebuilding the pages' model; the pages show the last one")
			}
		}()
	}
	return m, gen, nil
}

// fresh returns a model built from the cache as it is now (at most once per MinRebuild): the
// live stream rebuilds before it tells a page of a change, so the page's fetch gets it.
func (s *Server) fresh(ctx context.Context) (*view.Model, uint64, error) {
	if err := s.rebuild(ctx); err != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.model == nil {
			return nil, 0, err
		}
		s.o.Log.Error(err, "Reading the cache; the pages show the last model")
	}
	return s.latest()
}

func (s *Server) latest() (*view.Model, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.model, s.gen, nil
}

// staleLocked reports whether the model is missing, behind the cache, or older than 30 s.
func (s *Server) staleLocked() bool {
	return s.model == nil || s.o.Store.Generation() != s.gen || s.o.Now().Sub(s.builtAt) >= 30*time.Second
}

// rebuild builds the model from the cache unless it is up to date, at most once per
// MinRebuild; one rebuild at a time (buildMu), while pages keep reading the last model.
func (s *Server) rebuild(ctx context.Context) error {
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	s.mu.Lock()
	if !s.staleLocked() {
		s.mu.Unlock()
		return nil
	}
	wait := time.Duration(0)
	if s.model != nil {
		wait = s.o.MinRebuild - s.o.Now().Sub(s.builtAt)
	}
	s.mu.Unlock()
	if wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
	}
	gen := s.o.Store.Generation()
	snap, err := s.o.Store.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("reading the cache: %w", err)
	}
	m := view.Build(snap)
	s.mu.Lock()
	s.model, s.gen, s.builtAt = m, gen, s.o.Now()
	s.mu.Unlock()
	return nil
}

// Generation is the cache generation the current model was built from.
func (s *Server) generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// staticHandler serves the embedded assets, cacheable for a short while.
func staticHandler(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		files.ServeHTTP(w, r)
	})
}

// errorf is an error shown to the user with a status.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) error {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}
