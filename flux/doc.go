// Package flux reads topology files in Storm's Flux format (YAML) and builds them
// with the Go classes a binary registered in a component.Registry.
//
// # The model
//
// A file names spouts and bolts by className, says how to make each
// (constructorArgs, properties, configMethods, refs to components: entries) and wires
// them with streams. Load reads the file: it substitutes ${key} and ${ENV-NAME},
// merges includes, parses with positions and checks the structure, without looking
// classes up. Build looks each className up in the registry, makes the components:
// entries, declares spouts and bolts through the registry (each class's maker runs
// once, checking its values), checks every stream's grouping against the streams the
// source class declares, and maps the config. Everything is refused before anything
// starts, as an *Error "FILE:LINE:COL: reason" (several at once with errors.Join),
// never at runtime.
//
// File.Resolved is the document after substitution and includes: what a submitter
// ships, and what a worker reads with Parse (no filter file, no includes needed).
//
// # Substitution
//
// As in Flux, substitution is on the text, line by line, before YAML parsing: ${key}
// takes key from the --filter properties file (Options.Filter; key=value or key: value
// lines), ${ENV-NAME} takes the environment variable NAME, but only with --env-filter
// (Options.EnvFilter): Flux's docs present env substitution as a filter, and its
// parser substitutes the environment only with that flag. Unlike Flux, a variable
// with no value is refused at its line and column (Flux leaves "${key}" as text,
// which then reaches a class as a value nobody meant); comment lines are left alone.
// Places are the file's: a column after a substitution on its line is moved back by
// what the substitution changed, and a place inside a substituted value is the
// variable's ${.
//
// # Includes
//
// includes: [{file, override}] are read relative to the including file and merged as
// Flux does: with override: true the included file's name, config keys, components,
// spouts and bolts (by id) replace the including file's; with false the including
// file's stay, and File.Notes says what was not taken (Flux logs a warning); streams
// are always added. Includes are not recursive (an included file's includes are
// refused; Flux ignores them).
//
// # Taken and refused
//
//	Flux                                   here
//	name, config, spouts, bolts, streams   taken
//	components: + ref / reflist            taken: classes that declare Value, made by
//	                                       Registry.Make, passed as made (ArgOf, PropOf)
//	constructorArgs                        taken: Spec.Args, checked by the maker
//	properties {name, value|ref|reflist}   taken: Spec.Properties (an unread one refused)
//	configMethods {name, args}             taken: Spec.Calls, a name the class does not
//	                                       list in Declaration.Methods refused
//	parallelism                            taken (default 1)
//	groupings SHUFFLE FIELDS ALL GLOBAL    taken, with streamId; FIELDS checked against
//	NONE DIRECT LOCAL_OR_SHUFFLE           the source's declared fields
//	includes (files), override             taken
//	${key} with --filter                   taken
//	${ENV-NAME} with --env-filter          taken
//	FluxShellSpout, FluxShellBolt          taken where registered: every gale binary
//	                                       does (package app, multilang.Components);
//	                                       a bare Registry refuses them (ErrMultilang)
//	includes resource: true                refused (no classpath)
//	CUSTOM groupings, customClass          refused (a Java class)
//	topologySource                         refused (a Java class)
//	factory, factoryArgs                   refused (the maker is the factory)
//	numTasks                               refused (one task per executor)
//	onHeap/offHeapMemoryLoad, cpuLoad      refused (no resource-aware scheduling)
//	workerHooks                            refused (no worker hooks)
//	cycles                                 refused (gale refuses cycles, STORM-3637)
//	any other key                          refused, with a did-you-mean
//
// Config keys map to topology.Config (StormConfig lists them: topology.workers to
// Built.Workers, topology.acker.executors, topology.max.spout.pending,
// topology.message.timeout.secs, topology.enable.message.timeouts,
// topology.executor.receive.buffer.size, topology.transfer.batch.size,
// topology.batch.flush.interval.millis, topology.debug to Built.Debug). A key gale
// does not know is kept in Built.Ignored, in file order, for the caller to list in
// one line at start; it is never dropped silently. A mistyped value of a known key is
// refused at its line.
//
// # Serve pipelines
//
// BuildPipeline builds a file for gale serve --pipeline: the file declares no spouts,
// its streams read the log with from: log, and at least one bolt must be a sink: a
// bolt whose class declares no output stream (component.Declaration.Outputs nil or
// empty), which is where the component package already calls a class a sink.
package flux
