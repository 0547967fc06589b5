package console

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/fairway-sched/fairway/cli"
	"github.com/fairway-sched/fairway/console/auth"
	"github.com/fairway-sched/fairway/console/history"
	"github.com/fairway-sched/fairway/console/svg"
	"github.com/fairway-sched/fairway/console/view"
)

// FragmentHeader asks for a page's main part only: the live script swaps it in.
const FragmentHeader = "X-Fairway-Fragment"

// pageTemplate is the layout with one page's "main".
type pageTemplate struct{ t *template.Template }

var pageNames = []string{"overview", "queues", "queue", "workloads", "nodes", "why", "login", "error"}

func parsePages() (map[string]*pageTemplate, error) {
	out := map[string]*pageTemplate{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/pager.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("parsing the %s page: %w", name, err)
		}
		out[name] = &pageTemplate{t: t}
	}
	return out, nil
}

// pageData is what every page's template gets.
type pageData struct {
	Title  string
	Active string
	// User is who is signed in; Sees says what they see ("everything", "namespaces a, b").
	User, Sees string
	// CanLogout is true in token mode.
	CanLogout  bool
	Now        time.Time
	Generation uint64
	Page       any
}

// request is one authenticated page request.
type request struct {
	r     *http.Request
	user  *auth.User
	scope view.Scope
	model *view.Model
	gen   uint64
}

// page wraps a page's handler: authenticate, scope, model, render.
func (s *Server) page(name string, build func(*request) (string, any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, err := s.o.Authenticator.Authenticate(r)
		if err != nil {
			s.authFailed(w, r, err)
			return
		}
		m, gen, err := s.current(r.Context())
		if err != nil {
			s.fail(w, r, errorf(http.StatusServiceUnavailable, "The console's cache is not ready: %v", err))
			return
		}
		sc, err := s.o.Scoper.Scope(r.Context(), u, m.Namespaces())
		if err != nil {
			s.fail(w, r, errorf(http.StatusServiceUnavailable, "Could not ask the API server what you may see: %v", err))
			return
		}
		req := &request{r: r, user: u, scope: sc, model: m, gen: gen}
		title, data, err := build(req)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.render(w, r, name, http.StatusOK, pageData{Title: title, Active: name, User: u.Name, Sees: sees(sc),
			CanLogout: s.o.Login, Now: m.Now, Generation: gen, Page: data})
	}
}

func sees(sc view.Scope) string {
	if sc.All {
		return "all namespaces"
	}
	nss := make([]string, 0, len(sc.Namespaces))
	for ns := range sc.Namespaces {
		nss = append(nss, ns)
	}
	slices.Sort(nss)
	switch len(nss) {
	case 0:
		return "no namespace"
	case 1:
		return "namespace " + nss[0]
	}
	return "namespaces " + strings.Join(nss, ", ")
}

// render executes a page, or only its main part for the live script.
func (s *Server) render(w http.ResponseWriter, r *http.Request, name string, status int, d pageData) {
	t := s.pages[name]
	var b bytes.Buffer
	which := "layout"
	if r.Header.Get(FragmentHeader) == "1" {
		which = "main"
	}
	if err := t.t.ExecuteTemplate(&b, which, d); err != nil {
		s.o.Log.Error(err, "Rendering a page", "page", name)
		http.Error(w, "rendering the page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Fairway-Generation", strconv.FormatUint(d.Generation, 10))
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func (s *Server) authFailed(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, auth.ErrNoCredentials) && s.o.Login {
		if r.Header.Get(FragmentHeader) == "1" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	status := http.StatusUnauthorized
	if !errors.Is(err, auth.ErrNoCredentials) && !errors.Is(err, auth.ErrUnauthenticated) {
		status = http.StatusServiceUnavailable
	}
	s.o.Log.V(1).Info("Refused a request", "path", r.URL.Path, "reason", err.Error())
	s.fail(w, r, errorf(status, "You are not signed in: %v", err))
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	var he *httpError
	if errors.As(err, &he) {
		status = he.status
	}
	s.render(w, r, "error", status, pageData{Title: http.StatusText(status), Page: err.Error(), Now: s.o.Now()})
}

func (s *Server) overview(q *request) (string, any, error) {
	return "Overview", q.model.Overview(q.scope), nil
}

func (s *Server) queues(q *request) (string, any, error) {
	return "Queues", q.model.QueuesFor(q.scope), nil
}

// queuePage is one queue: its row, policy, namespaces, waiting work and usage charts.
type queuePage struct {
	Queue      cli.QueueView
	Namespaces []string
	Policy     cli.PolicyView
	Waiting    []*view.Workload
	Charts     []chart
	// HistorySource says where the charts come from; HistoryError why there are none.
	HistorySource, HistoryError string
}

type chart struct {
	Title string
	SVG   template.HTML
}

func (s *Server) queue(q *request) (string, any, error) {
	name := q.r.PathValue("name")
	var p queuePage
	found := false
	for _, qv := range q.model.QueuesFor(q.scope).Items {
		if qv.Name == name {
			p.Queue, found = qv, true
		}
	}
	if !found {
		return "", nil, errorf(http.StatusNotFound, "No queue named %q that you may see.", name)
	}
	p.Namespaces = q.model.QueueNamespaces(q.scope, name)
	p.Policy = q.model.Policy(name)
	for _, w := range q.model.WorkloadsFor(q.scope, "") {
		if w.Queue == name && w.Waiting {
			p.Waiting = append(p.Waiting, w)
		}
	}
	if s.o.History != nil {
		p.HistorySource = s.o.HistorySource
		h, err := s.o.History.Queue(q.r.Context(), name, q.model.Now)
		if err != nil {
			p.HistoryError = err.Error()
		} else {
			p.Charts = charts(h)
		}
	}
	return "Queue " + name, p, nil
}

// charts draws a queue's history: per day for 30 days, per hour for 24 hours; GPU, CPU, memory.
func charts(h history.Queue) []chart {
	type res struct {
		name, unit, class string
		of                func(history.Usage) float64
	}
	rs := []res{
		{"GPU-hours", "GPU-h", "gpu", func(u history.Usage) float64 { return u.GPUHours }},
		{"CPU core-hours", "core-h", "cpu", func(u history.Usage) float64 { return u.CPUHours }},
		{"Memory GiB-hours", "GiB-h", "memory", func(u history.Usage) float64 { return u.MemoryGiBHours }},
	}
	var out []chart
	for _, r := range rs {
		var days, hours []float64
		var dl, hl []string
		for _, u := range h.Days {
			days = append(days, r.of(u))
			dl = append(dl, u.Start.Format("Jan 2"))
		}
		for _, u := range h.Hours {
			hours = append(hours, r.of(u))
			hl = append(hl, u.Start.Format("15h"))
		}
		out = append(out,
			chart{Title: r.name + " per day, last 30 days", SVG: svg.Bars{Title: r.name + " per day", Unit: r.unit, Labels: dl, Values: days, Every: 7, Class: r.class}.Render()},
			chart{Title: r.name + " per hour, last 24 hours", SVG: svg.Bars{Title: r.name + " per hour", Unit: r.unit, Labels: hl, Values: hours, Every: 6, Class: r.class}.Render()})
	}
	return out
}

// Items per page of the Workloads and Nodes pages.
const (
	workloadsPerPage = 100
	nodesPerPage     = 64
)

// workloadsPage lists workloads by kind.
type workloadsPage struct {
	Query    string
	Sections []view.WorkloadSection
	Pager    view.Pager
	Links    pageLinks
}

// pageLinks are the previous and next pages' URLs ("" for none).
type pageLinks struct{ Prev, Next string }

func links(r *http.Request, p view.Pager) pageLinks {
	at := func(n int) string {
		v := r.URL.Query()
		v.Set("page", strconv.Itoa(n))
		return r.URL.Path + "?" + v.Encode()
	}
	var l pageLinks
	if p.Page > 1 {
		l.Prev = at(p.Page - 1)
	}
	if p.Page < p.Pages {
		l.Next = at(p.Page + 1)
	}
	return l
}

func pageOf(r *http.Request) int {
	n, _ := strconv.Atoi(r.URL.Query().Get("page"))
	return n
}

func (s *Server) workloads(q *request) (string, any, error) {
	query := q.r.URL.Query().Get("q")
	ws, pager := view.Paginate(q.model.WorkloadsFor(q.scope, query), pageOf(q.r), workloadsPerPage)
	return "Workloads", workloadsPage{Query: query, Sections: view.Sections(ws), Pager: pager, Links: links(q.r, pager)}, nil
}

// nodesPage is the GPU grid.
type nodesPage struct {
	Allowed bool
	Query   string
	Nodes   []view.NodeGrid
	Pager   view.Pager
	Links   pageLinks
}

func (s *Server) nodes(q *request) (string, any, error) {
	query := strings.ToLower(strings.TrimSpace(q.r.URL.Query().Get("q")))
	var match []view.NodeGrid
	if q.scope.Nodes || q.scope.All {
		for _, n := range q.model.Nodes {
			if query == "" || strings.Contains(strings.ToLower(n.Name+" "+n.GPUType), query) {
				match = append(match, n)
			}
		}
	}
	nodes, pager := view.Paginate(match, pageOf(q.r), nodesPerPage)
	return "Nodes", nodesPage{Allowed: q.scope.Nodes || q.scope.All, Query: query, Nodes: view.CutGrids(nodes, q.scope), Pager: pager, Links: links(q.r, pager)}, nil
}

func (s *Server) why(q *request) (string, any, error) {
	return "Why", q.model.Why(q.scope, q.r.URL.Query().Get("q")), nil
}

// funcs are the templates' helpers.
// count is n with its noun, "1 pod", "4 pods": never "1 pods" (issue 39). n is any integer a
// view holds (templates do not convert int to int64).
func count(n any, one, many string) (string, error) {
	var v int64
	switch x := n.(type) {
	case int:
		v = int64(x)
	case int32:
		v = int64(x)
	case int64:
		v = x
	default:
		return "", fmt.Errorf("count: %T is not an integer", n)
	}
	if v == 1 {
		return "1 " + one, nil
	}
	return strconv.FormatInt(v, 10) + " " + many, nil
}

var funcs = template.FuncMap{
	"count": count,
	"age":   func(sec int64) string { return duration.HumanDuration(time.Duration(sec) * time.Second) },
	"since": func(now, t time.Time) string {
		return duration.HumanDuration(now.Sub(t))
	},
	"amount": amount,
	"bar":    bar,
	"pct":    func(f float64) string { return strconv.Itoa(int(math.Round(f*100))) + "%" },
	"res": func(q cli.QueueView, r string) cli.QueueAmounts {
		return q.Resources[r]
	},
	"indent": func(depth int) string { return strings.Repeat("\u00a0\u00a0\u00a0", depth) },
	"lower":  strings.ToLower,
	"slug": func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			if r >= 'A' && r <= 'Z' {
				return r + 'a' - 'A'
			}
			return '-'
		}, s)
	},
	"deref": func(a *cli.Amount) cli.Amount {
		if a == nil {
			return 0
		}
		return *a
	},
}

// amount prints a resource amount: GPUs and cores as decimals, memory in Gi.
func amount(res string, a cli.Amount) string {
	v := float64(a)
	if res == "memory" {
		v /= 1 << 30
		return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + "Gi"
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// bar draws allocated against guarantee (and limit) as a small SVG: the fill is what the queue
// holds, the tick its guarantee; above the guarantee the fill is the borrowed colour.
func bar(a cli.QueueAmounts) template.HTML {
	top := math.Max(float64(a.Allocated), float64(a.Guaranteed))
	top = math.Max(top, float64(a.FairShare))
	if a.Limit != nil {
		top = math.Max(top, float64(*a.Limit))
	}
	if top <= 0 {
		top = 1
	}
	const w, h = 160.0, 12.0
	x := func(v cli.Amount) float64 { return math.Min(w, w*float64(v)/top) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="qbar" viewBox="0 0 %g %g" width="%g" height="%g" role="img">`, w, h, w, h)
	fmt.Fprintf(&b, `<title>%s allocated of %s guaranteed</title>`, amount("gpu", a.Allocated), amount("gpu", a.Guaranteed))
	fmt.Fprintf(&b, `<rect class="track" x="0" y="2" width="%g" height="8"/>`, w)
	within := math.Min(float64(a.Allocated), float64(a.Guaranteed))
	fmt.Fprintf(&b, `<rect class="alloc" x="0" y="2" width="%.1f" height="8"/>`, x(cli.Amount(within)))
	if a.Allocated > a.Guaranteed {
		fmt.Fprintf(&b, `<rect class="borrowed" x="%.1f" y="2" width="%.1f" height="8"/>`, x(a.Guaranteed), x(a.Allocated)-x(a.Guaranteed))
	}
	fmt.Fprintf(&b, `<rect class="quota" x="%.1f" y="0" width="2" height="12"/>`, math.Max(x(a.Guaranteed)-1, 0))
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // numbers only
}
