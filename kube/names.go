package kube

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ValidName checks an object's name as the API server does for a
// Deployment, an HPA or a KEDA ScaledObject: a DNS-1123 subdomain (at
// most 253 characters of lower-case letters, digits, '-' and '.',
// alphanumeric at both ends; apimachinery's IsDNS1123Subdomain). what
// names the flag for the message.
func ValidName(what, name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("%s %q is not a Kubernetes object name: %s", what, clip(name), strings.Join(errs, "; "))
	}
	return nil
}

// ValidNamespace checks a namespace as the API server does: a DNS-1123
// label (at most 63 characters of lower-case letters, digits and '-',
// alphanumeric at both ends; apimachinery's IsDNS1123Label).
func ValidNamespace(what, ns string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("%s %q is not a Kubernetes namespace: %s", what, clip(ns), strings.Join(errs, "; "))
	}
	return nil
}

// clip keeps a message one readable line whatever was given: control
// characters are quoted by %q, and a long value is cut.
func clip(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
