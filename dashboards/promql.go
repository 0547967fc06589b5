package dashboards

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// This file is a small PromQL scanner: enough to find the metric names a query selects and to
// catch malformed queries (unbalanced brackets, unterminated strings, stray characters), without
// taking github.com/prometheus/prometheus into the product's go.mod, where its requirements
// would raise client_golang, grpc and golang.org/x/* for every binary. Full parsing is
// Prometheus's own: dashboards/parsecheck (a module of its own) parses every query with
// Prometheus's parser and checks it finds the same metrics as this scanner, and
// dashboards-check sends every query to a real Prometheus.

// MetricRef is a metric a query selects: a name, or a __name__ regex.
type MetricRef struct {
	Name string
	// Regex is true for {__name__=~"..."}; Name is then the (anchored) pattern.
	Regex bool
}

// Matches reports whether the reference selects the metric name.
func (r MetricRef) Matches(name string) bool {
	if !r.Regex {
		return r.Name == name
	}
	re, err := regexp.Compile("^(?:" + r.Name + ")$")
	return err == nil && re.MatchString(name)
}

type tokenKind int

const (
	tIdent tokenKind = iota
	tString
	tNumber
	tPunct
)

type token struct {
	kind tokenKind
	text string
	pos  int
}

// aggregators may be followed by by/without before their parenthesis.
var aggregators = []string{"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio"}

// keywords are never metric names where they appear as bare identifiers.
var keywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
	"and", "or", "unless", "atan2", "inf", "nan", "start", "end"}

// labelListKeywords take a parenthesised list of label names.
var labelListKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

func tokenize(expr string) ([]token, error) {
	var out []token
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for ; j < len(expr) && expr[j] != c; j++ {
				if expr[j] == '\\' && c != '`' {
					j++
				}
			}
			if j >= len(expr) {
				return nil, fmt.Errorf("unterminated string at offset %d", i)
			}
			out = append(out, token{tString, expr[i+1 : j], i})
			i = j + 1
		case isDigit(c) || (c == '.' && i+1 < len(expr) && isDigit(expr[i+1])):
			j := i
			for j < len(expr) && (isIdentChar(expr[j]) || expr[j] == '.') {
				j++
			}
			out = append(out, token{tNumber, expr[i:j], i})
			i = j
		case isIdentStart(c):
			j := i
			for j < len(expr) && (isIdentChar(expr[j]) || expr[j] == ':') {
				j++
			}
			out = append(out, token{tIdent, expr[i:j], i})
			i = j
		case strings.IndexByte("(){}[],+-*/%^@:", c) >= 0:
			out = append(out, token{tPunct, string(c), i})
			i++
		case c == '=' || c == '!' || c == '<' || c == '>':
			j := i + 1
			if j < len(expr) && (expr[j] == '=' || expr[j] == '~') {
				j++
			}
			op := expr[i:j]
			if op == "!" {
				return nil, fmt.Errorf("unexpected %q at offset %d", op, i)
			}
			out = append(out, token{tPunct, op, i})
			i = j
		default:
			return nil, fmt.Errorf("unexpected character %q at offset %d", c, i)
		}
	}
	return out, nil
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) }

// Metrics returns the metrics a PromQL expression selects, in order of appearance, and an error
// when the expression is malformed in a way the scanner can see.
func Metrics(expr string) ([]MetricRef, error) {
	toks, err := tokenize(expr)
	if err != nil {
		return nil, err
	}
	if err := balanced(toks); err != nil {
		return nil, err
	}
	var refs []MetricRef
	add := func(r MetricRef) {
		if !slices.Contains(refs, r) {
			refs = append(refs, r)
		}
	}
	braces := 0    // inside {...}: label matchers
	labelList := 0 // paren depth of a by(...)/on(...) list; 0 when not in one
	parens := 0
	for i, t := range toks {
		next := func(k int) token {
			if i+k < len(toks) {
				return toks[i+k]
			}
			return token{kind: tPunct}
		}
		switch {
		case t.kind == tPunct && t.text == "{":
			braces++
			continue
		case t.kind == tPunct && t.text == "}":
			braces--
			continue
		case t.kind == tPunct && t.text == "(":
			parens++
			continue
		case t.kind == tPunct && t.text == ")":
			if labelList == parens {
				labelList = 0
			}
			parens--
			continue
		}
		if t.kind != tIdent || labelList != 0 {
			continue
		}
		if braces > 0 {
			// {__name__="x"} or {__name__=~"x.*"}.
			if t.text == "__name__" && next(1).kind == tPunct && next(2).kind == tString {
				switch next(1).text {
				case "=":
					add(MetricRef{Name: next(2).text})
				case "=~":
					add(MetricRef{Name: next(2).text, Regex: true})
				default:
					return nil, fmt.Errorf("__name__%s is not supported by the checks; select metrics by = or =~", next(1).text)
				}
			}
			continue
		}
		if slices.Contains(labelListKeywords, t.text) && next(1).text == "(" {
			labelList = parens + 1
			continue
		}
		if next(1).kind == tPunct && next(1).text == "(" {
			continue // a function or an aggregation
		}
		if slices.Contains(aggregators, t.text) && (next(1).text == "by" || next(1).text == "without") {
			continue
		}
		if slices.Contains(keywords, t.text) {
			continue
		}
		if i > 0 && toks[i-1].text == "@" {
			continue
		}
		add(MetricRef{Name: t.text})
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("selects no metric")
	}
	return refs, nil
}

func balanced(toks []token) error {
	pairs := map[string]string{")": "(", "}": "{", "]": "["}
	var stack []token
	for _, t := range toks {
		if t.kind != tPunct {
			continue
		}
		switch t.text {
		case "(", "{", "[":
			stack = append(stack, t)
		case ")", "}", "]":
			if len(stack) == 0 || stack[len(stack)-1].text != pairs[t.text] {
				return fmt.Errorf("unbalanced %q at offset %d", t.text, t.pos)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 {
		return fmt.Errorf("unclosed %q at offset %d", stack[len(stack)-1].text, stack[len(stack)-1].pos)
	}
	return nil
}
