package relay

import (
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/xds-relay/xds-relay/config"
)

// NewLogger builds the process logger from the log section of the config,
// writing to out (the process passes os.Stderr). Components name their
// children (lg.Named("upstream")). Its level can change at run time
// (LogLevel): a Relay built with it serves PUT /debug/log_level and applies
// log.level on reload.
func NewLogger(c config.Log, out io.Writer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	var enc zapcore.Encoder
	switch c.Format {
	case config.LogJSON:
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		// "1.5s", as the config writes durations (and the console format
		// does), not production's bare 1.5 with no unit.
		ec.EncodeDuration = zapcore.StringDurationEncoder
		enc = zapcore.NewJSONEncoder(ec)
	case config.LogConsole:
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, fmt.Errorf("log.format: %q is not one of json, console", c.Format)
	}
	atomic := zap.NewAtomicLevelAt(level)
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(out)), atomic)
	// Repeated lines are sampled: each second, the first logSampleFirst
	// entries of a level and message are written, then one in
	// logSampleThereafter. A fleet of clients repeating one warning (a
	// NACK, a refused name) cannot flood the log; metrics count them all.
	core = zapcore.NewSamplerWithOptions(core, time.Second, logSampleFirst, logSampleThereafter)
	core = leveledCore{Core: core, level: atomic}
	return zap.New(core, zap.ErrorOutput(zapcore.Lock(zapcore.AddSync(out)))), nil
}

// leveledCore carries the AtomicLevel NewLogger's core filters on, so that
// LogLevel can find it from the logger alone (Named keeps the core).
type leveledCore struct {
	zapcore.Core
	level zap.AtomicLevel
}

func (c leveledCore) With(fields []zapcore.Field) zapcore.Core {
	return leveledCore{Core: c.Core.With(fields), level: c.level}
}

// LogLevel returns the level that lg, built by NewLogger, filters on; ok
// is false for any other logger (its level cannot change at run time).
func LogLevel(lg *zap.Logger) (level zap.AtomicLevel, ok bool) {
	if lg == nil {
		return zap.AtomicLevel{}, false
	}
	c, ok := lg.Core().(leveledCore)
	return c.level, ok
}

// Log sampling per second and per (level, message); see NewLogger.
const (
	logSampleFirst      = 100
	logSampleThereafter = 100
)
