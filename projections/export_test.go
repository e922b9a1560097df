package projections

// CloseAsKilled closes the file as a killed process leaves it: no sync, the
// unsynced marker left in place.
func (s *Store) CloseAsKilled() error { return s.db.Close() }

// UnsyncedMarker is where the marker of the file at path lives.
var UnsyncedMarker = unsyncedMarker
