package multilang

import (
	"time"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/topology"
)

// Components are Storm Flux's shell wrappers as component classes, so that a
// Flux file written for Storm runs unchanged: flux.ShellSpoutClass
// (FluxShellSpout) and flux.ShellBoltClass (FluxShellBolt), each with
// constructorArgs [[command and its arguments], [output field names]]. The
// command runs in the component's directory (component.Spec.Dir: the file's
// directory, or on a cluster the unpacked --resources directory), as Storm runs
// it in the jar's resources/. Every gale binary registers them (package app).
func Components() []component.Declaration {
	return []component.Declaration{{
		Class: flux.ShellSpoutClass,
		Doc:   "a spout in any language, a subprocess speaking Storm's multilang protocol: constructorArgs [[command...], [fields...]]",
		Spout: func(s component.Spec) (func() topology.Spout, error) {
			cmd, fields, err := shellArgs(s)
			if err != nil {
				return nil, err
			}
			return ShellSpout(cmd, s.Dir, shellOptions(s, fields)...), nil
		},
		Outputs: shellOutputs,
	}, {
		Class: flux.ShellBoltClass,
		Doc:   "a bolt in any language, a subprocess speaking Storm's multilang protocol: constructorArgs [[command...], [fields...]]",
		Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			cmd, fields, err := shellArgs(s)
			if err != nil {
				return nil, err
			}
			return ShellBolt(cmd, s.Dir, shellOptions(s, fields)...), nil
		},
		Outputs: shellOutputs,
	}}
}

// shellArgs reads FluxShellSpout's and FluxShellBolt's constructorArgs.
func shellArgs(s component.Spec) (cmd, fields []string, err error) {
	if cmd, err = s.ArgStrings(0); err != nil {
		return nil, nil, err
	}
	if len(cmd) == 0 {
		return nil, nil, &component.SpecError{Arg: 0, Call: -1, Msg: "constructorArgs[0]: the command is empty (want [program, its arguments...])"}
	}
	if fields, err = s.ArgStrings(1); err != nil {
		return nil, nil, err
	}
	return cmd, fields, nil
}

func shellOutputs(s component.Spec) ([]component.Output, error) {
	fields, err := s.ArgStrings(1)
	if err != nil {
		return nil, err
	}
	if len(fields) == 0 {
		return nil, nil // a sink bolt
	}
	return []component.Output{{Fields: fields}}, nil
}

// SubprocessTimeoutKey is Storm's config key of the subprocess timeout; in a
// topology file's config it sets the shell components' Timeout.
const SubprocessTimeoutKey = "topology.subprocess.timeout.secs"

// shellOptions are a shell class's options: its outputs, and the file's
// subprocess timeout (flux has checked it is a whole number of seconds >= 1).
func shellOptions(s component.Spec, fields []string) []Option {
	opts := []Option{Outputs("default", fields...)}
	if s.Config != nil {
		opts = append(opts, Conf(s.Config)) // the topology's conf, as Storm sends it
	}
	if n, ok := s.Config[SubprocessTimeoutKey].(int); ok && n > 0 {
		opts = append(opts, Timeout(time.Duration(n)*time.Second))
	}
	return opts
}
