package server

import (
	"fmt"
	"strings"

	"github.com/gale-stream/gale/builtin"
	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/topology"
)

// TableSinkClass is the sink class a pipeline file names for its sink bolts: a
// bolt that writes each input tuple as one row of a table, the columns taken
// from the tuple's fields of the same names, idempotently (insert-once by the
// conflict columns, or a versioned upsert). Its properties are those of
// builtin.ReadTable, as gale.sink.SQL's (which names its database by url):
//
//	table     the table (required)
//	columns   the columns, each a field of the input (required)
//	conflict  the key columns, among columns (required): a PRIMARY KEY or UNIQUE
//	mode      insert-once (default) or versioned-upsert
//	version   versioned-upsert's version column
//	create    the statement that creates the table (CREATE TABLE IF NOT EXISTS),
//	          run at every start; without it the table must exist
//
// It is bound to the server's database when the pipeline is built, so it exists
// only in a pipeline file's build (FilePipeline), not in the program's registry.
const TableSinkClass = "gale.sink.Table"

// FilePipeline is the pipeline a Storm Flux file describes (gale serve
// --pipeline FILE.yaml): the file declares no spout, its streams take `from:
// log` for the log spout, and at least one bolt is a sink (TableSinkClass, or
// a class of reg that declares no output stream). Its classes are reg's, plus
// TableSinkClass. The file is read and checked now, with every refusal at its
// FILE:LINE:COLUMN; the classes are checked by a first build against a database
// that refuses every use, so that a wrong class or property fails here, before
// anything starts.
func FilePipeline(path string, o flux.Options, reg *component.Registry) (Pipeline, error) {
	f, err := flux.Load(path, o)
	if err != nil {
		return Pipeline{}, err
	}
	return filePipeline(f, path, reg, true)
}

// FilePipelineFrom is the pipeline of a resolved document (flux.File.Resolved:
// substituted, includes merged), read with flux.Parse, its refusals at their
// lines in the document (file names it in them): what a gale worker builds a
// pipeline file from, as the serve process that submitted it did from the file
// (PipelineFile). It is not checked by a first build: the worker's build is the
// check, and its error the worker's reason to refuse.
func FilePipelineFrom(file string, resolved []byte, reg *component.Registry) (Pipeline, error) {
	f, err := flux.Parse(file, resolved)
	if err != nil {
		return Pipeline{}, err
	}
	return filePipeline(f, file, reg, false)
}

// PipelineFile is the file a pipeline was read from (FilePipeline): on a cluster
// the serve process ships Resolved through the object store, and each worker
// builds the pipeline from it (FilePipelineFrom).
type PipelineFile struct {
	// Path is the file as named (gale serve --pipeline FILE.yaml).
	Path string
	// Resolved is the document after substitution and includes.
	Resolved []byte
}

func filePipeline(f *flux.File, path string, reg *component.Registry, checkBuild bool) (Pipeline, error) {
	var sinks, creates []string
	for _, b := range f.Bolts {
		if b.Class != TableSinkClass {
			continue
		}
		sinks = append(sinks, b.ID)
		var table string
		for _, p := range b.Properties {
			if p.Name == "table" {
				table, _ = p.Value.Literal.(string)
			}
		}
		for _, p := range b.Properties {
			if p.Name != "create" {
				continue
			}
			stmt, ok := p.Value.Literal.(string)
			if !ok || strings.TrimSpace(stmt) == "" {
				return Pipeline{}, &flux.Error{File: p.Pos.File, Line: p.Pos.Line, Col: p.Pos.Col,
					Msg: fmt.Sprintf("bolt %q: property create: want the statement that creates its table, a string", b.ID)}
			}
			stmt, err := builtin.CheckCreate(stmt, table)
			if err != nil {
				return Pipeline{}, &flux.Error{File: p.Value.Pos.File, Line: p.Value.Pos.Line, Col: p.Value.Pos.Col,
					Msg: fmt.Sprintf("bolt %q: property create: %v", b.ID, err)}
			}
			creates = append(creates, stmt)
		}
	}
	p := Pipeline{
		Name:           f.Name,
		Doc:            "from " + path,
		Schema:         func(sink.Dialect) []string { return creates },
		SinkComponents: sinks,
		File:           &PipelineFile{Path: path, Resolved: f.Resolved},
		Build: func(parts Parts) (Built, error) {
			r, err := fileRegistry(reg, parts.SinkOptions())
			if err != nil {
				return Built{}, err
			}
			b, err := f.BuildPipeline(r, parts.Spout, ingest.SpoutFields)
			if err != nil {
				return Built{}, err
			}
			return Built{Topology: b.Topology}, nil
		},
	}
	if f.Name == "" {
		return Pipeline{}, &flux.Error{File: path, Line: 1, Col: 1, Msg: "the file has no name: (the pipeline's name)"}
	}
	if !checkBuild {
		return p, nil
	}
	// A first build, with no database: every class, property and stream checked.
	check := pinnedDB("(a check of the file: no database)")
	defer check.SQL.Close()
	// (A column that is no field of the input is refused there too, at the
	// element: the table's reader checks it against Spec.Inputs.)
	if _, err := p.Build(Parts{Spout: func() topology.Spout { return &remoteLogSpout{} }, DB: check}); err != nil {
		return Pipeline{}, err
	}
	return p, nil
}

// fileRegistry is reg's classes and TableSinkClass bound to so (the server's
// database, counters and health).
func fileRegistry(reg *component.Registry, so sink.Options) (*component.Registry, error) {
	r := &component.Registry{}
	if reg != nil {
		for _, d := range reg.Classes() {
			if err := r.Register(d); err != nil {
				return nil, err
			}
		}
	}
	if err := r.Register(tableSink(so)); err != nil {
		return nil, fmt.Errorf("%s: %w (the program registers a class of the server's name)", TableSinkClass, err)
	}
	return r, nil
}

// tableSink declares TableSinkClass writing through so.
func tableSink(so sink.Options) component.Declaration {
	tick := so.BatchDelay // the sink writes what it holds at each tick, as sink.SetBolt has it
	if tick == 0 {
		tick = sink.DefaultBatchDelay
	}
	return component.Declaration{
		Class:     TableSinkClass,
		TickEvery: tick,
		Doc:       "writes each input tuple as one row (columns = fields of the same names), insert-once or versioned upsert",
		Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			// The table's properties are gale.sink.SQL's, read alike; create is
			// run by FilePipeline's Schema, with serve's other statements.
			ts, err := builtin.ReadTable(s)
			if err != nil {
				return nil, err
			}
			o := so
			o.Tables = []sink.Table{ts.Table}
			o.Rows = builtin.TableRows(TableSinkClass, ts.Table)
			return sink.NewBolt(o)
		},
	}
}
