// Package admission is headroom's Kubernetes admission webhook: it reads an
// admission.k8s.io/v1 AdmissionReview for a vLLM Deployment, StatefulSet,
// Pod, KAITO Workspace, LeaderWorkerSet (a multi-node group: the leader's
// vLLM command planned on the whole group's GPUs) or KServe
// InferenceService (the Hugging Face runtime's vLLM), gathers the evidence (the vLLM flags, the GPU the
// pod is scheduled on, the model), asks the memory planner whether vLLM
// will start and serve one request of its context length, and answers with
// a verdict: denied with the planner's numbers, allowed with warnings, or
// allowed with a JSON patch (RFC 6902) that fills safe settings in.
//
// Decisions (each is documented again in deploy/README.md):
//
//   - Fail open. When the model or the GPU cannot be resolved the object is
//     allowed with a warning that names what could not be read; the
//     webhook configurations use failurePolicy: Ignore, so an unreachable
//     webhook never blocks a deployment either. A webhook that guesses
//     must not stop a rollout.
//   - Bypass. headroom.dev/bypass-resource-checks: "true" (exactly "true")
//     turns denials into warnings. KAITO's kaito.sh/bypass-resource-checks
//     is honoured the same way, but only with the value "true": KAITO
//     itself checks only that the key exists, so "false" bypasses there
//     (docs/kaito.md §3); here it does not.
//   - Pods owned by a controller (a ReplicaSet, a StatefulSet, a Job) are
//     not checked again: their owner was checked when it was admitted, and
//     a denial at pod level would leave a bypassed Deployment without pods.
//   - Models resolve through the embedded catalog or a ConfigMap named by
//     headroom.dev/model-config; the webhook never reaches the Hugging Face
//     Hub at admission time (latency, egress) and never reads the webhook
//     pod's own file system for a model path.
//   - Nothing is read from the environment at admission time: every
//     dependency (ConfigMap getter, HPA lister, clock, logger, metrics) is
//     passed to NewHandler.
//   - A memory budget of 256 MiB, the chart's limit (GOMEMLIMIT 200 MiB):
//     reviews whose bodies sum to DefaultReviewBytes are read and checked
//     at once (each counted as at least ReviewFloorBytes) and ReviewQueue
//     wait, at most ReviewWait, before their bodies are read; past
//     that 429 or 503, and failurePolicy Ignore admits the object. At most
//     maxContainers vLLM containers of a pod are checked and maxWarnings
//     warnings answered. docs/servers.md has the numbers.
package admission

// Annotations the webhook reads and writes.
const (
	// AnnotationGPU names the GPU when the pod's node selection does not:
	// a device ("L4"), an instance type ("g6.xlarge"), a GFD product label,
	// a MIG slice, or a memory size ("24GiB").
	AnnotationGPU = "headroom.dev/gpu"
	// AnnotationModelConfig names a ConfigMap in the object's namespace
	// whose config.json (and optional model.safetensors.index.json)
	// describes the model, for models the catalog does not know.
	AnnotationModelConfig = "headroom.dev/model-config"
	// AnnotationBypass set to exactly "true" turns denials into warnings.
	AnnotationBypass = "headroom.dev/bypass-resource-checks"
	// AnnotationKAITOBypass is KAITO's bypass annotation, honoured the same
	// way (only "true").
	AnnotationKAITOBypass = "kaito.sh/bypass-resource-checks"
	// AnnotationAutofix set to exactly "true" lets the mutating webhook
	// fill missing --max-model-len and --gpu-memory-utilization and write
	// AnnotationPlan.
	AnnotationAutofix = "headroom.dev/autofix"
	// AnnotationPlan is written by the mutating webhook: a one-line summary
	// of the plan.
	AnnotationPlan = "headroom.dev/plan"
	// AnnotationStorage says where the checkpoint is read from at start-up
	// (cached, local or network; docs/startup.md), for the start-up time a
	// startup probe must cover; without it the default class is assumed.
	AnnotationStorage = "headroom.dev/storage"
	// AnnotationVLLMVersion declares the vLLM release a workload runs
	// ("0.11.0"), for images whose tag names none (an in-house build); it
	// wins over the image tag.
	AnnotationVLLMVersion = "headroom.dev/vllm-version"
)

// Names from the NVIDIA device plugin and GPU feature discovery that the
// webhook reads from pod specs.
const (
	// ResourceGPU is the device plugin's whole-GPU resource.
	ResourceGPU = "nvidia.com/gpu"
	// ResourceSharedGPU is the resource the device plugin advertises for
	// time-sliced or MPS-shared GPUs when renameByDefault is on.
	ResourceSharedGPU = "nvidia.com/gpu.shared"
	// resourceMIGPrefix starts the MIG resources of the "mixed" strategy
	// (nvidia.com/mig-1g.10gb).
	resourceMIGPrefix = "nvidia.com/mig-"
	// labelInstanceType is the well-known node label of the cloud
	// instance type; labelInstanceTypeBeta is its deprecated spelling.
	labelInstanceType     = "node.kubernetes.io/instance-type"
	labelInstanceTypeBeta = "beta.kubernetes.io/instance-type"
	// labelSharingStrategy and labelReplicas are set by GPU feature
	// discovery on nodes whose GPUs are time-sliced or MPS-shared
	// ("time-slicing"/"mps"; replicas per GPU).
	labelSharingStrategy = "nvidia.com/gpu.sharing-strategy"
	labelReplicas        = "nvidia.com/gpu.replicas"
)
