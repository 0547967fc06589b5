// Package mutatingwebhook is fairway's pod admission webhook: it recognises the pods that ML
// tools make (every framework of package adapters, whose doc lists them), and rewrites them so
// that fairway schedules them with the right queue, gang, priority and GPU share, while users
// keep their tools and their YAML.
//
// The package holds the pod defaulter (PodDefaulter: one pod in, the same pod rewritten or a
// denial out), the admission handler that turns its result into one JSON patch, the informer
// caches it reads (queues, nodes' GPU memory, priority classes, framework objects), the
// MutatingWebhookConfiguration it keeps up to date, and Run, which wires them into a
// controller-runtime manager with the serving certificate of package certs (rotated by the
// webhook, or cert-manager's). Framework knowledge lives in the adapters packages, not here.
//
// README.md in this directory documents, for users and administrators, what is rewritten and
// why.
package mutatingwebhook
