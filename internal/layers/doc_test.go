// Package layers tests the layering of docs/architecture.md on the module
// as it is: no package imports one that stands above it. It holds only
// tests.
package layers
