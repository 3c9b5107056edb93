// Package app is the entry point of a gale binary: every gale command (worker,
// submit, nats, serve, top, cluster status, kill, rebalance, activate,
// deactivate, log check and salvage, sink rebuild, components, version) over
// the topologies, pipelines and component classes the program registers. gale's
// own binary (cmd/gale) is a main over it; so is a user's.
//
// Go cannot ship code to a running cluster the way Storm ships a jar to Nimbus:
// a gale worker runs what its own build registered. So a user who wants their
// topology on a cluster builds their own binary, which is gale with their
// topologies in it, and runs that binary's worker, submit and serve. The
// smallest one:
//
//	func main() {
//		app.Main(
//			app.WithName("squares"),
//			app.WithTopology("squares", func(ctx context.Context, env cluster.Env) (*cluster.Deployment, error) {
//				b := topology.NewBuilder()
//				b.SetSpout("numbers", func() topology.Spout { return &numbers{} }, 1).Output("n")
//				b.SetBasicBolt("square", func() topology.BasicBolt { return &square{} }, 2).ShuffleGrouping("numbers")
//				t, err := b.Build()
//				return &cluster.Deployment{Topology: t, Config: topology.DefaultConfig()}, err
//			}),
//		)
//	}
//
// Then `squares nats`, `squares worker` on each machine and `squares submit
// squares` run it on a cluster. A factory runs on every worker and in the
// submitter (for the fingerprint), from the submit arguments in env.Args
// (TopologyFlags declares the flags it parses); it must not touch files or NATS
// (tasks do that in Open and Prepare). A topology built from component classes
// finds them in env.Components (WithComponent); examples/wordlen in the
// repository is a whole project doing so, with a serve pipeline (WithPipeline)
// behind `wordlen serve`. A topology that needs no cluster runs in any Go
// process with engine.Start, without this package.
//
// What is registered (WithTopology, WithPipeline, WithDefaultPipeline,
// WithComponent, WithCommand) is checked when New runs: a duplicate name, a nil
// factory, a name the cluster does not take (its subjects and keys want
// letters, digits, '-', '_' and '='), a pipeline named like a topology, a
// command named like one of gale's or another of the program's. Such an error
// is not a panic and not a surprise on a worker at submit time: App.Err returns
// it, and Run prints it and exits 2 before any command runs.
//
// # Builds on one cluster
//
// A worker compares the submitted topology's fingerprint with its own build's
// and refuses one that differs (gale cluster status shows why): the
// components, their streams and fields, groupings, parallelism, the settings
// both ends of an edge share, and the codec version. The code inside a spout
// or bolt is not in it, so that a rolling upgrade of a bolt's code keeps the
// topology running. A change after which an old and a new build would
// disagree on what a tuple holds must therefore show in the shape (a field or
// stream renamed) or in the topology's name; otherwise stop the topology
// (gale kill) before starting workers of the new build.
//
// A serve pipeline is registered twice over: gale serve --pipeline NAME runs
// it, and gale worker builds it under the topology name NAME when a gale serve
// --nats puts its bolts on the cluster's workers.
package app
