// Package component is the registry of spout and bolt classes that a topology file
// names: what a Go binary offers where Storm's Flux would load a class from a jar.
//
// # Why a registry
//
// A Flux file names each spout and bolt by its Java className and says how to make
// it: constructorArgs, properties, configMethods. Flux finds the class on the
// classpath and calls the constructor and setters by reflection, so the jar decides
// what a file may name. A Go binary cannot load code it was not built with (no jar,
// no class loader; the plugin package needs every dependency built identically). So
// the binary registers, under a class name, every spout and bolt a file may use, each
// with a maker that turns the file's values into a factory of task instances. The
// set of classes is fixed when the binary is built; the file picks among them and
// wires them, as in Flux.
//
// # Flux's vocabulary here
//
//	Flux file                       here
//	className                       Declaration.Class, found by Registry.Lookup
//	constructorArgs (a list)        Spec.Args, read by position: ArgString(0), ArgInt(1)...
//	properties (name and value)     Spec.Properties, read by name: String(key, def)...
//	id, parallelism                 Registry.Add's id and parallelism
//	a component under spouts/bolts  Declaration.Kind: spout, bolt or basic bolt
//	declareOutputFields (in Java)   Declaration.Outputs, which may depend on the Spec
//	streams (from, to, grouping)    the caller's, on the Declarer that Add returns
//	components (beans), ref         Declaration.Value, made by Registry.Make; the value
//	                                is passed as it is, read with ArgOf / PropOf
//	configMethods (name, args)      Spec.Calls, read with Spec.Method; the names a class
//	                                accepts are its Declaration.Methods
//
// A file's reader should refuse what has no equivalent here (factory, factoryArgs)
// rather than drop it.
//
// Errors about a Spec's values are *SpecError, which says which argument, property
// or call is wrong, so that the reader (package flux) can point at its line; and,
// for a string in it (an expression), which character (Path, At), so that the
// reader points at that character's line and column.
//
// A bolt's Spec.Inputs are the streams it reads with their fields, filled by the
// reader before the maker runs (it prepares each bolt after the components it reads,
// Registry.Prepare): a class whose work is over its input's fields (an expression)
// checks it at build, not on the first tuple.
//
// # Checked once, before any task
//
// A class's maker runs once per component, when the topology is built, not once per
// task: it reads and checks the Spec and returns the factory the engine calls for
// each task. Add runs it, then Outputs, and turns an error or a panic of either into
// an error naming the component's id and class, so a bad file fails before anything
// starts. Add also refuses an argument or property that neither read: a misspelt
// property would otherwise silently keep its default, where Flux would find no
// setter and fail. So a maker reads every value it accepts through the Spec's
// methods, and reads them there, not later in a task.
//
// Values come as YAML or JSON decode them: string, int, float64, bool, nil, []any,
// map[string]any. The Spec's methods name the position or key and the type wanted
// when a value does not fit. Int takes 3 and 3.0 (JSON has only float64), not 3.5;
// Float takes 3; nothing turns the string "3" into a number, or a number into a
// string; Duration wants a unit ("500ms"), never a bare number.
package component
