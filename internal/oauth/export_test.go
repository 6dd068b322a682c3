package oauth

import "time"

// SetRefreshTimeout shortens m's bound on one refresh (RefreshTimeout), for
// a test of a token endpoint that never answers; call it before m is used.
func SetRefreshTimeout(m *Manager, d time.Duration) { m.refreshTimeout = d }
