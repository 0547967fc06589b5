package sim

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// sigs.k8s.io/yaml turns YAML into JSON before it decodes, so the errors of a decoded trace or
// config name a field ("json: unknown field \"gpuShar\"") but no line, and a user with a
// 500-entry trace is left to search. The helpers here find the line with yaml.v3, whose nodes
// keep their positions, and say it the way the CSV readers do: "trace.yaml line 5: ...".

var (
	// yamlSyntaxRE is a syntax error, which already has its line.
	yamlSyntaxRE = regexp.MustCompile(`yaml: line (\d+): (.*)`)
	// unknownFieldRE and typeFieldRE name the field an error is about: an unknown one, or one
	// whose value has the wrong type ("Go struct field TraceEntry.pods.gpus of type int": the
	// JSON path after the type's name).
	unknownFieldRE = regexp.MustCompile(`unknown field "([^"]+)"`)
	typeFieldRE    = regexp.MustCompile(`Go struct field [^.\s]+\.(\S+) of type`)
)

// decodeError explains err, an error of yaml.UnmarshalStrict decoding b (the file path), with
// the line of the key it is about when it can be found. Within a sequence of entries under
// entriesKey (the trace's "pods"), it decodes the entries one by one into a newEntry() and names
// the first that fails, since a field path such as pods.gpus fits every entry.
func decodeError(path string, b []byte, err error, entriesKey string, newEntry func() any) error {
	msg := cleanDecodeError(err)
	if m := yamlSyntaxRE.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s line %s: %s", path, m[1], m[2])
	}
	var doc yamlv3.Node
	if yamlv3.Unmarshal(b, &doc) != nil || len(doc.Content) == 0 {
		return fmt.Errorf("%s: %s", path, msg)
	}
	root := doc.Content[0]
	if entries := mappingValue(root, entriesKey); entries != nil && entries.Kind == yamlv3.SequenceNode && newEntry != nil {
		for i, e := range entries.Content {
			raw, merr := yamlv3.Marshal(e)
			if merr != nil {
				continue
			}
			if eerr := yaml.UnmarshalStrict(raw, newEntry()); eerr != nil {
				emsg := cleanDecodeError(eerr)
				line := keyLine(e, errorField(emsg))
				if line == 0 {
					line = valueLine(e, quotedValue(emsg))
				}
				if line == 0 {
					line = e.Line
				}
				return fmt.Errorf("%s line %d: %s %d%s: %s", path, line, strings.TrimSuffix(entriesKey, "s"), i+1, nameOf(e), emsg)
			}
		}
	}
	if line := keyLine(root, errorField(msg)); line > 0 {
		return fmt.Errorf("%s line %d: %s", path, line, msg)
	}
	return fmt.Errorf("%s: %s", path, msg)
}

// cleanDecodeError drops sigs.k8s.io/yaml's and encoding/json's prefixes, which say how the
// file was read rather than what is wrong with it.
func cleanDecodeError(err error) string {
	msg := err.Error()
	for _, p := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "error converting YAML to JSON: ", "json: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// errorField is the JSON path of the field an error message names, nil when it names none.
func errorField(msg string) []string {
	if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
		return []string{m[1]}
	}
	if m := typeFieldRE.FindStringSubmatch(msg); m != nil {
		return strings.Split(m[1], ".")
	}
	return nil
}

// keyLine is the line of the key at the end of path, looked for from n down (through sequences,
// in order); for a one-element path, the key at any depth. 0 when there is none.
func keyLine(n *yamlv3.Node, path []string) int {
	if n == nil || len(path) == 0 {
		return 0
	}
	switch n.Kind {
	case yamlv3.DocumentNode, yamlv3.SequenceNode:
		for _, c := range n.Content {
			if l := keyLine(c, path); l > 0 {
				return l
			}
		}
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == path[0] {
				if len(path) == 1 {
					return k.Line
				}
				if l := keyLine(v, path[1:]); l > 0 {
					return l
				}
			}
		}
		if len(path) == 1 {
			for i := 1; i < len(n.Content); i += 2 {
				if l := keyLine(n.Content[i], path); l > 0 {
					return l
				}
			}
		}
	}
	return 0
}

// quotedValue is the first quoted string of an error message: the bad value, for the errors of
// a type's own UnmarshalJSON (duration "soon": ...), which name no field.
func quotedValue(msg string) string {
	if m := quotedRE.FindStringSubmatch(msg); m != nil {
		return m[1]
	}
	return ""
}

var quotedRE = regexp.MustCompile(`"([^"]+)"`)

// valueLine is the line of the first key of the mapping e whose scalar value is v; 0 for none.
func valueLine(e *yamlv3.Node, v string) int {
	if e == nil || e.Kind != yamlv3.MappingNode || v == "" {
		return 0
	}
	for i := 0; i+1 < len(e.Content); i += 2 {
		if val := e.Content[i+1]; val.Kind == yamlv3.ScalarNode && val.Value == v {
			return e.Content[i].Line
		}
	}
	return 0
}

// mappingValue is the value of key in the mapping n, or nil.
func mappingValue(n *yamlv3.Node, key string) *yamlv3.Node {
	if n == nil || n.Kind != yamlv3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// nameOf is " (NAME)" for an entry with a name, else "".
func nameOf(e *yamlv3.Node) string {
	if v := mappingValue(e, "name"); v != nil && v.Value != "" {
		return " (" + v.Value + ")"
	}
	return ""
}

// entryLines are the lines where the entries under key begin, for the errors of checks that
// run after decoding (expand); nil when b cannot be read so.
func entryLines(b []byte, key string) []int {
	var doc yamlv3.Node
	if yamlv3.Unmarshal(b, &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	entries := mappingValue(doc.Content[0], key)
	if entries == nil || entries.Kind != yamlv3.SequenceNode {
		return nil
	}
	out := make([]int, len(entries.Content))
	for i, e := range entries.Content {
		out[i] = e.Line
	}
	return out
}

// atoiOr0 reads the "#line" the CSV readers record.
func atoiOr0(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
