package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/fairway-sched/fairway/console/auth"
)

// events is the live stream: a server-sent event "change" with the model's generation each
// time the cache changed and the model was rebuilt, and a comment every 15 s to keep proxies
// from closing an idle stream.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	if _, err := s.o.Authenticator.Authenticate(r); err != nil {
		http.Error(w, "not signed in", http.StatusUnauthorized)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	// Tell nginx-based proxies (ingress-nginx, oauth2-proxy's upstream) not to buffer.
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: 1000\n\n")
	fl.Flush()
	ctx := r.Context()
	sent := s.generation()
	tick := time.NewTicker(s.o.Poll)
	defer tick.Stop()
	beat := time.NewTicker(15 * time.Second)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
		case <-tick.C:
			if s.o.Store.Generation() == sent {
				continue
			}
			// Rebuild before telling the page, so that its fetch gets the change.
			_, gen, err := s.fresh(ctx)
			if err != nil || gen == sent {
				continue
			}
			sent = gen
			if _, err := fmt.Fprintf(w, "event: change\ndata: %d\n\n", gen); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// loginPage asks for a token (token mode).
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if !s.o.Login {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.render(w, r, "login", http.StatusOK, pageData{Title: "Sign in", Now: s.o.Now(), Page: loginData{Next: safeNext(r.URL.Query().Get("next"))}})
}

type loginData struct {
	Next, Error string
}

// safeNext keeps a redirect target on the console: a path, never another site.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || next == "" || u.IsAbs() || u.Host != "" || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(next, "//") {
		return "/"
	}
	return u.RequestURI()
}

// sameOrigin refuses a form posted from another site (the cookie is SameSite=Strict too).
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	return true
}

// login checks the posted token with a TokenReview and keeps it in an HttpOnly cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !s.o.Login {
		http.Error(w, "the console is not in token mode", http.StatusNotFound)
		return
	}
	if !sameOrigin(r) {
		http.Error(w, "cross-site sign-in refused", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	next := safeNext(r.PostForm.Get("next"))
	fail := func(msg string) {
		s.render(w, r, "login", http.StatusUnauthorized, pageData{Title: "Sign in", Now: s.o.Now(), Page: loginData{Next: next, Error: msg}})
	}
	if tok == "" {
		fail("Paste a token: `kubectl create token NAME -n NAMESPACE` makes one for a ServiceAccount, and your OIDC ID token works where the API server accepts it.")
		return
	}
	if _, err := s.o.Reviewer.Review(r.Context(), tok); err != nil {
		fail("The API server does not accept this token: " + err.Error())
		return
	}
	http.SetCookie(w, &http.Cookie{Name: auth.CookieName, Value: tok, Path: "/", HttpOnly: true, Secure: s.o.SecureCookie,
		SameSite: http.SameSiteStrictMode, MaxAge: int((8 * time.Hour).Seconds())})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout forgets the cookie.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-site sign-out refused", http.StatusForbidden)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: auth.CookieName, Value: "", Path: "/", HttpOnly: true, Secure: s.o.SecureCookie,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
