// Package auth decides who a console request comes from and what they may see.
//
// Authentication follows the Kubernetes Dashboard and Headlamp: a bearer token (from the
// Authorization header, or the cookie the login page sets) checked with a TokenReview, or the
// user and groups a fronting proxy (oauth2-proxy and the like) asserts in headers, believed
// only from the proxy's addresses. Local mode (`fairway console --kubeconfig`) has one user.
//
// Authorization asks the API server with SubjectAccessReviews, as the user: may they list pods
// in every namespace, or in which; may they list nodes; may they list Queues. Answers are cached
// for a short time per user, so a page costs no API call once the user's answers are known.
package auth
