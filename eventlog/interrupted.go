package eventlog

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrSalvageInterrupted: a salvage stopped after it moved the damaged store aside
// and before it moved the fresh one in. Opening would create an empty log and give
// out acknowledged seqs again; running Salvage again finishes the move.
var ErrSalvageInterrupted = errors.New("eventlog: a salvage was interrupted")

// leftovers names what a salvage leaves beside dir: the fresh copy it was making
// (dir.salvage) and the damaged stores it moved aside (dir.damaged-*).
func leftovers(fs vfs.FS, dir string) (tmp string, damaged []string, err error) {
	parent, base := fs.PathDir(dir), fs.PathBase(dir)
	names, err := fs.List(parent)
	if err != nil && parent == "." {
		names, err = fs.List("") // Pebble's in-memory FS names its working directory ""
	}
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("eventlog: list %s: %w", parent, err)
	}
	for _, n := range names {
		switch {
		case n == base+".salvage":
			tmp = fs.PathJoin(parent, n)
		case strings.HasPrefix(n, base+".damaged-"):
			damaged = append(damaged, fs.PathJoin(parent, n))
		}
	}
	return tmp, damaged, nil
}

// refuseFresh is called before Open creates a new store in dir: a missing log
// beside a salvage's leftovers is not a new log, and starting one would hand out
// seqs that events were already acknowledged with.
func refuseFresh(fs vfs.FS, dir string) error {
	tmp, damaged, err := leftovers(fs, dir)
	switch {
	case err != nil:
		return err
	case tmp != "" && len(damaged) > 0:
		return fmt.Errorf("%w: %s is missing but the salvaged copy %s and the damaged store %s are there: run `gale log salvage` on it again to finish",
			ErrSalvageInterrupted, dir, tmp, damaged[len(damaged)-1])
	case len(damaged) > 0:
		return fmt.Errorf("%w: %s is missing but damaged stores moved aside by a salvage are there (%s): a new log would reuse their seqs; move them out of %s to start a new log on purpose",
			ErrDamaged, dir, strings.Join(damaged, ", "), fs.PathDir(dir))
	}
	return nil
}

// finishInterrupted completes a salvage that stopped between its two renames: the
// salvaged copy is whole (it is renamed only after its mark is written), so it
// only has to move into place. It reports whether there was one to finish.
func finishInterrupted(fs vfs.FS, dir string) (bool, error) {
	if _, err := fs.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	tmp, damaged, err := leftovers(fs, dir)
	if err != nil || tmp == "" || len(damaged) == 0 {
		return false, err
	}
	if err := fs.Rename(tmp, dir); err != nil {
		return false, fmt.Errorf("eventlog: salvage: finish moving %s to %s: %w", tmp, dir, err)
	}
	if err := syncDir(fs, fs.PathDir(dir)); err != nil {
		return false, fmt.Errorf("eventlog: salvage: sync %s: %w", fs.PathDir(dir), err)
	}
	return true, nil
}

// asideName is where Salvage moves the damaged store: dir.damaged-<time>, with a
// suffix when a salvage in the same second already took that name.
func asideName(fs vfs.FS, dir, stamp string) string {
	name := fmt.Sprintf("%s.damaged-%s", dir, stamp)
	for i := 2; ; i++ {
		if _, err := fs.Stat(name); errors.Is(err, os.ErrNotExist) {
			return name
		}
		name = fmt.Sprintf("%s.damaged-%s-%d", dir, stamp, i)
	}
}
