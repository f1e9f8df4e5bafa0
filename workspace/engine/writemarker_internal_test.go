package engine

import (
	"github.com/agentspace/agentspace/workspace/driver"
	"reflect"
	"testing"
)

// TestWriteMarkerMarksEveryWrite: every method of Tx that ReadTx does not
// have is a write, and writeMarker must override each one (a method it
// only inherits would let a job write unnoticed, and a group without
// savepoints keep half a failed job).
func TestWriteMarkerMarksEveryWrite(t *testing.T) {
	reads := map[string]bool{}
	rt := reflect.TypeFor[driver.ReadTx]()
	for i := range rt.NumMethod() {
		reads[rt.Method(i).Name] = true
	}
	tx := reflect.TypeFor[driver.Tx]()
	marker := reflect.TypeFor[writeMarker]()
	for i := range tx.NumMethod() {
		name := tx.Method(i).Name
		if reads[name] {
			continue
		}
		m, ok := marker.MethodByName(name)
		if !ok {
			t.Errorf("writeMarker has no %s", name)
			continue
		}
		// With no Tx under it, the call panics once it is passed on: a
		// method writeMarker overrides has marked the write by then.
		var wrote bool
		w := writeMarker{wrote: &wrote}
		args := []reflect.Value{reflect.ValueOf(w)}
		for j := 1; j < m.Type.NumIn(); j++ {
			args = append(args, reflect.Zero(m.Type.In(j)))
		}
		func() {
			defer func() { _ = recover() }()
			m.Func.Call(args)
		}()
		if !wrote {
			t.Errorf("writeMarker.%s does not mark the job as having written", name)
		}
	}
}
