{{- define "headroom.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "headroom.labels" -}}
app.kubernetes.io/part-of: headroom
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "headroom.webhookName" -}}
{{ .Release.Name }}-webhook
{{- end -}}

{{- define "headroom.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "headroom.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- define "headroom.webhookCommon" -}}
admissionReviewVersions: ["v1"]
sideEffects: None
failurePolicy: {{ .root.Values.webhook.failurePolicy }}
timeoutSeconds: {{ .root.Values.webhook.timeoutSeconds }}
clientConfig:
  service:
    name: {{ include "headroom.webhookName" .root }}
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
  {{- if and (not .root.Values.certs.certManager.enabled) .root.Values.certs.caBundle }}
  caBundle: {{ .root.Values.certs.caBundle }}
  {{- end }}
namespaceSelector:
  {{- toYaml .root.Values.webhook.namespaceSelector | nindent 2 }}
objectSelector:
  {{- toYaml .root.Values.webhook.objectSelector | nindent 2 }}
{{- end -}}
{{- define "headroom.workloadRules" -}}
- apiGroups: ["apps"]
  apiVersions: ["v1"]
  resources: ["deployments", "statefulsets"]
  operations: ["CREATE", "UPDATE"]
- apiGroups: ["kaito.sh"]
  apiVersions: ["v1beta1", "v1alpha1"]
  resources: ["workspaces"]
  operations: ["CREATE", "UPDATE"]
- apiGroups: ["leaderworkerset.x-k8s.io"]
  apiVersions: ["v1"]
  resources: ["leaderworkersets"]
  operations: ["CREATE", "UPDATE"]
- apiGroups: ["serving.kserve.io"]
  apiVersions: ["v1beta1"]
  resources: ["inferenceservices"]
  operations: ["CREATE", "UPDATE"]
{{- end -}}
