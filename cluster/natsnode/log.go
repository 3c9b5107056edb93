package natsnode

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// slogAdapter is the server's Logger on a *slog.Logger: notices are Info, warnings
// Warn, errors and fatal errors Error, debug and trace Debug.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) log(level slog.Level, format string, v []any) {
	if !a.l.Enabled(context.Background(), level) {
		return
	}
	a.l.Log(context.Background(), level, strings.TrimRight(fmt.Sprintf(format, v...), "\r\n"))
}

func (a slogAdapter) Noticef(format string, v ...any) { a.log(slog.LevelInfo, format, v) }
func (a slogAdapter) Warnf(format string, v ...any)   { a.log(slog.LevelWarn, format, v) }
func (a slogAdapter) Fatalf(format string, v ...any)  { a.log(slog.LevelError, format, v) }
func (a slogAdapter) Errorf(format string, v ...any)  { a.log(slog.LevelError, format, v) }
func (a slogAdapter) Debugf(format string, v ...any)  { a.log(slog.LevelDebug, format, v) }
func (a slogAdapter) Tracef(format string, v ...any)  { a.log(slog.LevelDebug-4, format, v) }
