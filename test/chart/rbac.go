package chart

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fairway-sched/fairway/test/cluster"
)

// JustifiedMarker starts the comment above a rule that names verbs the rule grants although a
// test run may not use them: "# justified: get, update — why". The text after the dash is the
// justification.
const JustifiedMarker = "justified:"

// Rule is one rule of a Role or ClusterRole that the chart binds to a ServiceAccount.
type Rule struct {
	// User is the ServiceAccount's user name (cluster.ServiceAccountUser).
	User string
	// Role is "ClusterRole/<name>" or "Role/<namespace>/<name>".
	Role string
	// Namespace is where the rule applies: the Role's namespace, "" for a ClusterRole.
	Namespace string
	rbacv1.PolicyRule
	// Justified maps the verbs the rule's comment justifies to the justification.
	Justified map[string]string
}

// BoundRules returns the rules of every Role and ClusterRole of the rendering, once per
// ServiceAccount a (Cluster)RoleBinding of the rendering binds it to, with the justifications of
// their comments.
func BoundRules(r *Rendering) ([]Rule, error) {
	roles := map[string][]Rule{} // by "Kind/ns/name" of the role
	type binding struct {
		roleKey string
		users   []string
		ns      string
	}
	var bindings []binding
	dec := yaml.NewDecoder(strings.NewReader(r.YAML))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("reading the rendering: %w", err)
		}
		if len(doc.Content) == 0 {
			continue
		}
		var meta struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name      string `yaml:"name"`
				Namespace string `yaml:"namespace"`
			} `yaml:"metadata"`
		}
		if err := doc.Decode(&meta); err != nil {
			return nil, err
		}
		switch meta.Kind {
		case "Role", "ClusterRole":
			rules, err := roleRules(&doc, meta.Kind, meta.Metadata.Namespace, meta.Metadata.Name)
			if err != nil {
				return nil, err
			}
			roles[roleKey(meta.Kind, meta.Metadata.Namespace, meta.Metadata.Name)] = rules
		case "RoleBinding", "ClusterRoleBinding":
			var b rbacv1.RoleBinding
			if err := decodeNode(&doc, &b); err != nil {
				return nil, err
			}
			ns := ""
			if b.RoleRef.Kind == "Role" {
				ns = meta.Metadata.Namespace
			}
			bb := binding{roleKey: roleKey(b.RoleRef.Kind, ns, b.RoleRef.Name), ns: meta.Metadata.Namespace}
			for _, s := range b.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind {
					bb.users = append(bb.users, cluster.ServiceAccountUser(s.Namespace, s.Name))
				}
			}
			bindings = append(bindings, bb)
		}
	}
	var out []Rule
	for _, b := range bindings {
		rules, ok := roles[b.roleKey]
		if !ok {
			return nil, fmt.Errorf("a binding refers to %s, which the chart does not render", b.roleKey)
		}
		for _, u := range b.users {
			for _, rule := range rules {
				rule.User = u
				if rule.Namespace == "" && strings.HasPrefix(b.roleKey, "ClusterRole/") && b.ns != "" {
					rule.Namespace = b.ns // a ClusterRole bound by a RoleBinding
				}
				out = append(out, rule)
			}
		}
	}
	return out, nil
}

func roleKey(kind, ns, name string) string {
	if kind == "ClusterRole" {
		return kind + "/" + name
	}
	return kind + "/" + ns + "/" + name
}

// roleRules reads a role's rules and the justifications in the comments above them.
func roleRules(doc *yaml.Node, kind, ns, name string) ([]Rule, error) {
	var role rbacv1.ClusterRole
	if err := decodeNode(doc, &role); err != nil {
		return nil, err
	}
	var items []*yaml.Node
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "rules" {
			items = root.Content[i+1].Content
		}
	}
	if len(items) != len(role.Rules) {
		return nil, fmt.Errorf("%s %s: %d rules but %d rule nodes", kind, name, len(role.Rules), len(items))
	}
	out := make([]Rule, len(role.Rules))
	for i, pr := range role.Rules {
		out[i] = Rule{Role: roleKey(kind, ns, name), PolicyRule: pr, Justified: justifications(items[i].HeadComment)}
		if kind == "Role" {
			out[i].Namespace = ns
		}
		for v := range out[i].Justified {
			if !slices.Contains(pr.Verbs, v) {
				return nil, fmt.Errorf("%s rule %d justifies verb %q, which it does not grant", out[i].Role, i, v)
			}
		}
	}
	return out, nil
}

// justifications parses "# justified: get, update — why" in a comment; the lines after it
// continue the reason.
func justifications(comment string) map[string]string {
	out := map[string]string{}
	var verbs []string
	var why []string
	flush := func() {
		for _, v := range verbs {
			out[v] = strings.Join(why, " ")
		}
	}
	for _, line := range strings.Split(comment, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		rest, ok := strings.CutPrefix(line, JustifiedMarker)
		if !ok {
			if verbs != nil && line != "" {
				why = append(why, line)
			}
			continue
		}
		flush()
		vs, reason, _ := strings.Cut(rest, "—")
		verbs, why = nil, []string{strings.TrimSpace(reason)}
		for _, v := range strings.Split(vs, ",") {
			if v = strings.TrimSpace(v); v != "" {
				verbs = append(verbs, v)
			}
		}
	}
	flush()
	return out
}

// decodeNode decodes a YAML node into a Kubernetes type through its JSON tags.
func decodeNode(n *yaml.Node, into any) error {
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, into)
}

// Wildcards returns the rules that grant "*" verbs, resources or API groups.
func Wildcards(rules []Rule) []Rule {
	var out []Rule
	for _, r := range rules {
		if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
			out = append(out, r)
		}
	}
	return out
}
