// Package testutil holds fluent builders of the objects the scheduling engine reads (pods, nodes,
// queues, pod groups), for tests of the engine and of the components that feed it:
//
//	testutil.MakePod("team-a", "p").GPU(2).Queue("team-a").Obj()
//	testutil.MakeNode("n1").GPUs(8, "H100").Obj()
//
// Builders fill in what a real object from the API server would carry (scheduler name, a fixed
// creation time, CPU and memory capacity) so that tests state only what they are about.
package testutil
