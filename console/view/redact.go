package view

import (
	"regexp"
	"strings"
)

// The scheduler's messages name the pods and gangs involved as NAMESPACE/NAME: an eviction's
// note names the work it made room for, a waiting gang's message the pods being evicted for
// it. Those can be another team's, and a user who may not list that team's pods must not read
// their names in the console, although the event or condition that carries the message lives
// in the user's own namespace. A message that names anything in a namespace the user does not
// see is therefore replaced whole (a workload's kind and name often follow the pod's), by what
// it says without the names.
var namespacedName = regexp.MustCompile(`\b([a-z0-9][-a-z0-9]{0,62})/[a-z0-9][-a-z0-9.]*`)

// hiddenMessage is what a user reads instead of a message that names another team's work.
const hiddenMessage = "(the scheduler's message names work in a namespace you may not see)"

// redact returns msg for the user, or hiddenMessage when it names work of a namespace the
// model knows and the user does not see.
func (m *Model) redact(sc Scope, msg string) string {
	if sc.All || !strings.Contains(msg, "/") {
		return msg
	}
	for _, match := range namespacedName.FindAllStringSubmatch(msg, -1) {
		if ns := match[1]; m.knowsNamespace(ns) && !sc.Sees(ns) {
			return hiddenMessage
		}
	}
	return msg
}

func (m *Model) knowsNamespace(ns string) bool {
	_, ok := m.namespaceSet[ns]
	return ok
}

// redactWorkload returns w as the user may read it: w itself when nothing in it names another
// team's work, else a copy with those messages replaced.
func (m *Model) redactWorkload(sc Scope, w *Workload) *Workload {
	msg, ev := m.redact(sc, w.Message), m.redact(sc, w.EvictingMessage)
	if msg == w.Message && ev == w.EvictingMessage {
		return w
	}
	c := *w
	c.Message, c.EvictingMessage = msg, ev
	return &c
}
