package chart

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

// AuditPolicy records the metadata of every request except the API server's own, which is what
// the RBAC report reads. Pass it with --audit-policy-file and --audit-log-path.
const AuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["system:apiserver"]
- level: Metadata
`

// AuditEvent is what the report reads of an audit.k8s.io/v1 Event.
type AuditEvent struct {
	// User is the user the request was authorized as: the impersonated user if any.
	User string
	Verb string
	Code int
	// Group, Resource, Subresource, Namespace and Name are the request's object reference.
	Group, Resource, Subresource, Namespace, Name string
	URI                                           string
}

// ReadAudit reads an audit log file (one JSON event per line), one event per request: a
// long-running request (a watch) is logged when its response starts and again when it ends.
func ReadAudit(path string) ([]AuditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []AuditEvent
	seen := map[string]int{} // audit ID -> index in out
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		var e struct {
			AuditID    string `json:"auditID"`
			Verb       string `json:"verb"`
			RequestURI string `json:"requestURI"`
			User       struct {
				Username string `json:"username"`
			} `json:"user"`
			ImpersonatedUser *struct {
				Username string `json:"username"`
			} `json:"impersonatedUser"`
			ObjectRef *struct {
				Resource, Namespace, Name, APIGroup, Subresource string
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		ev := AuditEvent{User: e.User.Username, Verb: e.Verb, URI: e.RequestURI}
		if e.ImpersonatedUser != nil {
			ev.User = e.ImpersonatedUser.Username
		}
		if e.ResponseStatus != nil {
			ev.Code = e.ResponseStatus.Code
		}
		if r := e.ObjectRef; r != nil {
			ev.Group, ev.Resource, ev.Subresource, ev.Namespace, ev.Name = r.APIGroup, r.Resource, r.Subresource, r.Namespace, r.Name
		}
		if i, ok := seen[e.AuditID]; ok && e.AuditID != "" {
			out[i] = ev
			continue
		}
		seen[e.AuditID] = len(out)
		out = append(out, ev)
	}
	return out, s.Err()
}

// Denied returns the events of users that the API server refused (403).
func Denied(events []AuditEvent, users ...string) []AuditEvent {
	var out []AuditEvent
	for _, e := range events {
		if e.Code == 403 && slices.Contains(users, e.User) {
			out = append(out, e)
		}
	}
	return out
}

// Usage is one verb on one resource that a rule grants, and how often it was used.
type Usage struct {
	User, Role, Group, Resource, Verb string
	// ResourceNames narrow the rule, when it names any.
	ResourceNames []string
	// Requests counts the authorized requests of the rule's user that the rule covers.
	Requests int
	// StreamedLists counts, for list, the watches that streamed the initial list instead
	// (sendInitialEvents=true: client-go's informers against an API server with WatchList);
	// against API servers without it the same informers list.
	StreamedLists int
	// Justification is the rule's reason for a verb a run may not use.
	Justification string
}

// Unused reports whether the grant was neither used nor justified.
func (u Usage) Unused() bool { return u.Requests == 0 && u.StreamedLists == 0 && u.Justification == "" }

// RuleUsage lists every verb × resource the rules grant with the requests that used it: requests
// by the rule's user, for that verb, API group and resource (subresources as "pods/binding"), in
// the rule's namespace when it has one, on one of its resourceNames when it names any. Refused
// requests do not count. An informer's initial list streamed in its watch counts for list (see
// Usage.StreamedLists).
func RuleUsage(rules []Rule, events []AuditEvent) []Usage {
	var out []Usage
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					u := Usage{User: r.User, Role: r.Role, Group: g, Resource: res, Verb: v, ResourceNames: r.ResourceNames, Justification: r.Justified[v]}
					for _, e := range events {
						if e.User != r.User || e.Group != g || e.Code == 403 || resourceOf(e) != res ||
							(r.Namespace != "" && e.Namespace != r.Namespace) ||
							(len(r.ResourceNames) > 0 && !slices.Contains(r.ResourceNames, e.Name)) {
							continue
						}
						switch {
						case e.Verb == v:
							u.Requests++
						case v == "list" && e.Verb == "watch" && strings.Contains(e.URI, "sendInitialEvents=true"):
							u.StreamedLists++
						}
					}
					out = append(out, u)
				}
			}
		}
	}
	return out
}

func resourceOf(e AuditEvent) string {
	if e.Subresource != "" {
		return e.Resource + "/" + e.Subresource
	}
	return e.Resource
}

// FormatUsage writes the usage as a table: one row per user, resource and verb.
func FormatUsage(usage []Usage) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SERVICE ACCOUNT\tROLE\tRESOURCE\tVERB\tREQUESTS\tVERDICT")
	for _, u := range usage {
		res := u.Resource
		if u.Group != "" {
			res += "." + u.Group
		}
		if len(u.ResourceNames) > 0 {
			res += " " + strings.Join(u.ResourceNames, ",")
		}
		verdict := "used"
		switch {
		case u.Requests == 0 && u.StreamedLists > 0:
			verdict = fmt.Sprintf("used: %d initial lists streamed in a watch", u.StreamedLists)
		case u.Requests == 0 && u.Justification != "":
			verdict = "justified: " + u.Justification
		case u.Requests == 0:
			verdict = "UNUSED"
		}
		sa := u.User[strings.LastIndex(u.User, ":")+1:]
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", sa, u.Role, res, u.Verb, u.Requests, verdict)
	}
	w.Flush()
	return b.String()
}
