package builtin

import "github.com/gale-stream/gale/component"

func wordComponents() []component.Declaration { return nil }
