// Package deploy holds the deployment files (the systemd unit, the
// Prometheus alert rules, the Grafana dashboard) so that `connecta init`
// writes the same bytes the repository documents and tests.
package deploy

import _ "embed"

// Unit is connecta.service, the hardened systemd unit.
//
//go:embed connecta.service
var Unit string

// AlertRules is prometheus/connecta-alerts.yml.
//
//go:embed prometheus/connecta-alerts.yml
var AlertRules string
