package builtin

import "github.com/gale-stream/gale/component"

func exprComponents() []component.Declaration { return nil }
