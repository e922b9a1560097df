package eventlog

import (
	"fmt"

	"github.com/rs/zerolog"
)

// natsLog passes what the embedded NATS server says to the service's log:
// its warnings and errors (a store that cannot write, JetStream shut
// down) as such, its notices at debug level, its debug and trace lines
// nowhere. Without it they went nowhere at all, and a full disk showed
// only as writes timing out. Its errors also tell health when a store
// stopped writing.
type natsLog struct {
	log    zerolog.Logger
	health *storeHealth
}

func (n natsLog) Noticef(format string, v ...any) { n.log.Debug().Msgf(format, v...) }
func (n natsLog) Warnf(format string, v ...any)   { n.log.Warn().Msgf(format, v...) }
func (n natsLog) Errorf(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	n.log.Error().Msg(line)
	n.health.heard(line)
}
func (n natsLog) Fatalf(format string, v ...any) { n.log.Error().Msgf(format, v...) }
func (n natsLog) Debugf(string, ...any)          {}
func (n natsLog) Tracef(string, ...any)          {}
