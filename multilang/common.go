package multilang

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/gale-stream/gale/topology"
)

// common handles the commands bolts and spouts share: log, error, metrics. It
// reports whether c was one of them.
func common(tc topology.TaskContext, reportError func(error), c *command) bool {
	switch c.Command {
	case "log":
		level := slog.LevelInfo
		if c.Level != nil {
			// Storm's levels: 0 trace, 1 debug, 2 info, 3 warn, 4 error.
			switch *c.Level {
			case 0, 1:
				level = slog.LevelDebug
			case 3:
				level = slog.LevelWarn
			case 4:
				level = slog.LevelError
			}
		}
		tc.Logger.Log(context.Background(), level, "subprocess log", "msg", c.Msg)
	case "error":
		reportError(fmt.Errorf("multilang: component %q task %d: subprocess error: %s", tc.Component, tc.TaskID, c.Msg))
	case "metrics":
		tc.Logger.Debug("subprocess metrics", "name", c.Name, "params", string(c.Params))
	default:
		return false
	}
	return true
}

// idText is an id as the subprocess sent it: a JSON string's content, or the text
// of a number.
func idText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", errors.New("no id")
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", err
	}
	return n.String(), nil
}

func itoa(i int) string { return strconv.Itoa(i) }
