// Package view turns what fairway's web console reads from its cache into what its pages show.
// It is pure: a Snapshot in, a Model out, and from the Model one page per user, cut down to
// what the user's Scope lets them see. The console's HTTP side (package console) only fetches,
// authorizes and renders, so every rule about what a page says, and what a restricted user must
// not see, is tested here on literal objects.
//
// The explanations are the CLI's: queue rows come from cli.BuildQueues, node GPUs from
// cli.BuildNodes, the Why page from cli.BuildWhy and cli.PrintWhy, and a waiting workload's
// reason and hint from cli.WaitReason and cli.Hint, so the console and `fairway why` never say
// two different things.
//
// A Model is built once per change of the cache and shared by every request until the next
// change; pages copy what they cut, so a Model is never written after Build returns.
package view
