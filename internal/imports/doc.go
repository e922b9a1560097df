// Package imports holds no code: its test, TestImportRules, is the one
// statement of which packages of the module may import which. The package
// docs point here instead of listing their imports in prose, which drifted
// from the code; the test reads the real imports with go list.
package imports
