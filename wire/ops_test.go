package wire

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/optypes"
	"github.com/agentspace/agentspace/workspace"
)

// TestEveryOpTypeHasAWireEntry: every op type of package workspace (a type
// with the Op interface's opName method, read from the package's source)
// has one entry in the wire's op table, and the table has no other.
func TestEveryOpTypeHasAWireEntry(t *testing.T) {
	declared, err := optypes.Declared("../workspace")
	require.NoError(t, err)
	require.NotEmpty(t, declared)
	var inTable []string
	for typ := range opsByType {
		inTable = append(inTable, typ.Name())
	}
	assert.ElementsMatch(t, declared, inTable, "every op type has one entry in the wire's op table")
	assert.Len(t, opsByCode, len(opsByType))
}

// TestOpCodesAreTheEnum: the op field's enum, which the OpenAPI document
// states and the server checks, lists exactly the table's codes.
func TestOpCodesAreTheEnum(t *testing.T) {
	f, ok := reflect.TypeFor[OpBody]().FieldByName("Op")
	require.True(t, ok)
	enum := strings.Split(f.Tag.Get("enum"), ",")
	assert.ElementsMatch(t, OpCodes(), enum)
}

// notCarried lists the op fields the wire refuses rather than carries:
// a batch op's Pin writes a reserved record, which only the store's own
// DSN may (TestAPinIsRefusedNotDropped).
var notCarried = map[string]bool{"Pin": true}

// TestEveryOpSurvivesTheWire: each op type, with every field set (by
// reflection, so a field added later is covered too), encodes to a body
// carrying its code and decodes back to the same op; the zero op too. A
// field in notCarried is refused when set, never dropped.
func TestEveryOpSurvivesTheWire(t *testing.T) {
	for typ, c := range opsByType {
		for name := range notCarried {
			if f, ok := typ.FieldByName(name); ok {
				v := reflect.New(typ).Elem()
				v.FieldByIndex(f.Index).SetBool(true)
				_, err := EncodeOp(v.Interface().(workspace.Op), nil)
				require.ErrorIs(t, err, workspace.ErrInvalid, "%v with %s set", typ, name)
			}
		}
		for _, filled := range []bool{false, true} {
			v := reflect.New(typ).Elem()
			if filled {
				fill(t, v, 1)
				for name := range notCarried {
					if f, ok := typ.FieldByName(name); ok {
						v.FieldByIndex(f.Index).SetZero()
					}
				}
			}
			op := v.Interface().(workspace.Op)
			b, err := EncodeOp(op, nil)
			require.NoError(t, err, typ)
			assert.Equal(t, c.code, b.Op)
			back, err := b.WorkspaceOp()
			require.NoError(t, err, typ)
			assert.Equal(t, op, back, "%v filled=%v", typ, filled)
		}
	}
}

// fill sets every field of v to a value that is not its zero, except a
// reference's Version, which a write never names.
func fill(t *testing.T, v reflect.Value, n int) {
	if v.Type() == reflect.TypeFor[json.RawMessage]() {
		// Raw JSON goes on the wire as JSON: a value of it is JSON.
		v.SetBytes([]byte(fmt.Sprintf(`{"n":%d}`, n)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[workspace.ArtifactRef]() {
			v.Set(reflect.ValueOf(workspace.ArtifactRef{ID: "id", Name: "name"}))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), n+i)
			}
		}
	case reflect.String:
		v.SetString("s" + strings.Repeat("x", n))
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(n))
	case reflect.Uint8:
		v.SetUint(uint64('a' + n%26))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), n)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(t, s.Index(0), n)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, n)
		fill(t, e, n+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	default:
		t.Fatalf("fill: no value for a %v", v.Type())
	}
}

// TestEncodeOpRefuses: what cannot be sent is an *InvalidError naming op
// (or the reference's version), and content is checked before encoding.
func TestEncodeOpRefuses(t *testing.T) {
	for _, op := range []workspace.Op{nil, &workspace.PutNoteOp{}} {
		_, err := EncodeOp(op, nil)
		var ie *workspace.InvalidError
		require.ErrorAs(t, err, &ie)
		assert.Equal(t, "op", ie.Field)
	}
	_, err := EncodeOp(&workspace.PutNoteOp{}, nil)
	assert.ErrorContains(t, err, "pass ops by value")
	_, err = EncodeOp(workspace.DeleteArtifactOp{Ref: workspace.ArtifactRef{Name: "a", Version: 2}}, nil)
	var ie *workspace.InvalidError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, "ref.version", ie.Field)
	tooBig := &workspace.InvalidError{Field: "content", Reason: "too big"}
	_, err = EncodeOp(workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "a", Content: []byte("x")}},
		func(b []byte) error {
			assert.Equal(t, []byte("x"), b)
			return tooBig
		})
	assert.Same(t, tooBig, err)
	_, err = OpBody{Op: "drop_table"}.WorkspaceOp()
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, "op", ie.Field)
}
