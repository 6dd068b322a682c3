package oauth

import "time"

// SetTokenRequestTimeout shortens m's bound on a refresh or a callback's
// code exchange (TokenRequestTimeout), for a test of a token endpoint that
// never answers; call it before m is used.
func SetTokenRequestTimeout(m *Manager, d time.Duration) { m.tokenRequestTimeout = d }
