package builtin

import "github.com/gale-stream/gale/component"

// Components declares every built-in class, for app to register in every gale
// binary (a Flux file names them by className; gale components lists them).
func Components() []component.Declaration {
	var ds []component.Declaration
	ds = append(ds, exprComponents()...)
	ds = append(ds, wordComponents()...)
	ds = append(ds, ioComponents()...)
	return ds
}
