// Package audit finds every vLLM server running in a Kubernetes cluster
// (Deployments, StatefulSets, Pods of their own, KAITO Workspaces,
// LeaderWorkerSets, KServe InferenceServices), plans each with the
// admission webhook's own evaluation (admission.Evaluate), and ranks them
// by risk: will not start, thin margins, more concurrent requests
// than the KV cache holds, CPU-only autoscaling, probes that restart a
// loading server, shared GPUs; with live data, KV-cache use, queued
// requests, preemptions, restarts and OOM kills.
//
// Decisions:
//
//   - Read-only. It lists and gets; the only other call is a GET through
//     the API server's pod proxy for /metrics (Options.Live).
//   - What cannot be read is a finding, never an error: an object that does
//     not decode, a GPU the catalog does not know, a namespace the user may
//     not list. Such workloads are "not checked"; they do not make the
//     audit fail (exit code 1 is for workloads at risk).
//   - A Deployment or StatefulSet owned by a KAITO Workspace is the
//     Workspace's: only the Workspace is planned; so are the StatefulSets
//     of a LeaderWorkerSet (its leaders', and each group's workers', owned
//     by the leader pod) and the Deployments of an InferenceService. A
//     group's pods are found by LWS's and KServe's name labels. Pods
//     controlled by a ReplicaSet or a StatefulSet are their workload's and
//     are read only for their node and their status.
//   - The GPU: what the pod spec says (the webhook's rules: annotation,
//     MIG resource, node selectors and affinity); where it says nothing,
//     the GPU feature discovery labels of the node its first scheduled pod
//     runs on (a LeaderWorkerSet's or InferenceService's pods are those
//     labelled with its name). The node's sharing labels (time-slicing,
//     MPS) always count.
package audit
