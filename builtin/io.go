package builtin

import "github.com/gale-stream/gale/component"

func ioComponents() []component.Declaration { return nil }
