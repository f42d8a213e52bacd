{{/* Labels of every object; the selector is the first alone. */}}
{{- define "nephele-ccm.labels" -}}
app.kubernetes.io/component: cloud-controller-manager
app.kubernetes.io/name: nephele-ccm
app.kubernetes.io/part-of: nephele
{{- end -}}

{{- define "nephele-ccm.selector" -}}
app.kubernetes.io/name: nephele-ccm
{{- end -}}

{{/*
The enabled controllers, comma-separated, in start order: .Values.controllers resolved as
the manager's --controllers is ("*", names, upstream aliases, "-name"), the route
controller only with configureCloudRoutes.
*/}}
{{- define "nephele-ccm.enabled" -}}
{{- $canonical := dict "cloud-node-controller" "cloud-node-controller" "cloud-node" "cloud-node-controller" "cloud-node-lifecycle-controller" "cloud-node-lifecycle-controller" "cloud-node-lifecycle" "cloud-node-lifecycle-controller" "service-lb-controller" "service-lb-controller" "service" "service-lb-controller" "service-controller" "service-lb-controller" "node-route-controller" "node-route-controller" "route" "node-route-controller" "route-controller" "node-route-controller" -}}
{{- $star := false -}}
{{- $named := dict -}}
{{- range .Values.controllers -}}
{{- if eq . "*" -}}
{{- $star = true -}}
{{- else -}}
{{- $name := trimPrefix "-" . -}}
{{- if not (hasKey $canonical $name) -}}
{{- fail (printf "controllers: unknown controller %q" $name) -}}
{{- end -}}
{{- $_ := set $named (get $canonical $name) (not (hasPrefix "-" .)) -}}
{{- end -}}
{{- end -}}
{{- $out := list -}}
{{- range list "cloud-node-controller" "cloud-node-lifecycle-controller" "service-lb-controller" "node-route-controller" -}}
{{- $on := $star -}}
{{- if hasKey $named . -}}
{{- $on = get $named . -}}
{{- end -}}
{{- if and (eq . "node-route-controller") (not $.Values.configureCloudRoutes) -}}
{{- $on = false -}}
{{- end -}}
{{- if $on -}}
{{- $out = append $out . -}}
{{- end -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{/* A rule on one core resource: (list resource verbs). */}}
{{- define "nephele-ccm.coreRule" -}}
- apiGroups:
  - ""
  resources:
  - {{ index . 0 }}
  verbs:
{{- range index . 1 }}
  - {{ . }}
{{- end }}
{{- end -}}

{{/* The controller service accounts, in start order, of the enabled controllers. */}}
{{- define "nephele-ccm.accounts" -}}
{{- $enabled := splitList "," (include "nephele-ccm.enabled" .) -}}
{{- $out := list -}}
{{- if or (has "cloud-node-controller" $enabled) (has "cloud-node-lifecycle-controller" $enabled) -}}
{{- $out = append $out "node-controller" -}}
{{- end -}}
{{- if has "service-lb-controller" $enabled -}}
{{- $out = append $out "service-controller" -}}
{{- end -}}
{{- if has "node-route-controller" $enabled -}}
{{- $out = append $out "route-controller" -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}
