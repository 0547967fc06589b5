// Package console is fairway's read-only web console (`fairway console`): Overview, Queues,
// Workloads, Nodes and Why pages for the people who do not live in kubectl, served from one
// informer cache, in Go only: html/template, assets embedded with embed, hand-written CSS, one
// small hand-written script for live updates, charts drawn as SVG on the server (package svg).
// Nothing is fetched from outside the console, so it works in an air-gapped cluster.
//
// Every request carries a Kubernetes identity (package auth): a bearer token checked with a
// TokenReview, or the user a trusted fronting proxy asserts. What a page shows is cut to what
// the user may list (SubjectAccessReviews, cached); the cut itself is package view's. The
// console only reads: its own API calls are list and watch, TokenReviews and
// SubjectAccessReviews.
//
// Pages update live: the browser keeps a server-sent-events stream open (/events) and, when
// the cache changes, fetches the page's main part again and swaps it in.
package console
