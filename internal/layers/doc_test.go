// Package layers tests DESIGN.md's layering on the module as it is: no
// package imports one that stands above it. It holds only tests.
package layers
