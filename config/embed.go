// Package config embeds the KubeSchedulerConfiguration files of this folder
// so that the sandbox runs, and the tests load, exactly what users deploy.
package config

import _ "embed"

// SecondScheduler is the profile for running Phalanx beside the default
// scheduler under schedulerName phalanx-scheduler.
//
//go:embed second-scheduler.yaml
var SecondScheduler []byte

// ReplaceDefault is the profile for running Phalanx instead of the default
// scheduler: schedulerName default-scheduler, the plugins of
// SecondScheduler, and upstream kube-scheduler's leader-election Lease.
//
//go:embed replace-default.yaml
var ReplaceDefault []byte

// GangOnly runs PhalanxQueueSort and PhalanxGang without topology
// placement, under schedulerName phalanx-scheduler.
//
//go:embed gang-only.yaml
var GangOnly []byte
