package projections

import (
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// CloseAsKilled closes the file as a killed process leaves it: no sync, the
// unsynced marker left in place.
func (s *Store) CloseAsKilled() error { return s.db.Close() }

// UnsyncedMarker is where the marker of the file at path lives.
var UnsyncedMarker = unsyncedMarker

// startPipeline is a pipeline as the follow loop runs one, with apply (the
// store's own when nil).
func (s *Store) startPipeline(apply func([]eventlog.Record, []domain.Event) error, applied func()) *pipeline {
	if apply == nil {
		apply = s.applyDecoded
	}
	return s.startPipelineEnding(apply, nil, nil, applied, pipelineDepth)
}
