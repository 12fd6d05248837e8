// Package config embeds the KubeSchedulerConfiguration files of this folder
// so that the sandbox runs, and the tests load, exactly what users deploy.
package config

import _ "embed"

// SecondScheduler is the profile for running Phalanx beside the default
// scheduler under schedulerName phalanx-scheduler.
//
//go:embed second-scheduler.yaml
var SecondScheduler []byte
