// Package app is the entry point of a gale binary: every gale command (worker,
// submit, nats, serve, top, cluster status, kill, rebalance, activate,
// deactivate, log check and salvage, sink rebuild, components, version) over the
// topologies, pipelines and component classes the program registers. gale's own binary (cmd/gale) is a main
// over it; so is a user's.
//
// Go cannot ship code to a running cluster the way Storm ships a jar to Nimbus:
// a gale worker runs what its own build registered, and refuses a submitted
// topology whose fingerprint differs from its own build's. So a user who wants
// their topology on a cluster builds their own binary, which is gale with their
// topologies in it, and runs that binary's worker, submit and serve:
//
//	func main() {
//		app.Main(
//			app.WithName("wordlen"),
//			app.WithTopology("wordlen", wordlen.Factory, app.TopologyFlags(wordlen.Flags)),
//			app.WithPipeline(wordlen.Pipeline()),
//		)
//	}
//
// Then `wordlen nats`, `wordlen worker` on each machine and `wordlen submit
// wordlen --its-flags` run the topology on a cluster, and `wordlen serve` runs
// the pipeline behind gale's ingest API. A topology that needs no cluster runs
// in any Go process with engine.Start, without this package.
//
// What is registered (WithTopology, WithPipeline, WithDefaultPipeline,
// WithComponent, WithCommand) is checked when New runs: a duplicate name, a nil
// factory, a name the cluster does not take (its subjects and keys want letters,
// digits, '-' and '_'), a pipeline named like a topology, a command named like
// one of gale's or another of the program's. Such an error is not a panic and not a
// surprise on a worker at submit time: App.Err returns it, and Run prints it and
// exits 2 before any command runs.
//
// A serve pipeline is registered twice over: gale serve --pipeline NAME runs it,
// and gale worker builds it under the topology name NAME when a gale serve --nats
// puts its bolts on the cluster's workers. Every process of a cluster must
// therefore be the same build: the workers check it by fingerprint.
package app
