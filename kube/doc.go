// Package kube holds the facts about Kubernetes objects that more than one
// of headroom's front ends reads (the admission webhook, doctor, audit): how
// long a probe lets a container start before the kubelet restarts it,
// what a HorizontalPodAutoscaler scales on, and which ConfigMap key a file
// of a container comes from. Each rule lives here once so
// that the webhook and doctor cannot disagree about a default.
package kube
