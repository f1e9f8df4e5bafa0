// Package optypes reads the op types package workspace declares, from its
// source, for the tests that hold an op table to them (the engine's and the
// wire's): a type is an op when it has the Op interface's opName method.
package optypes

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
)

// Declared returns the names of the op types declared in the non-test Go
// files of dir, package workspace's directory.
func Declared(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var declared []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "opName" {
				continue
			}
			if id, ok := fn.Recv.List[0].Type.(*ast.Ident); ok {
				declared = append(declared, id.Name)
			}
		}
	}
	return declared, nil
}
