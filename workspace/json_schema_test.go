package workspace

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const schemaFile = "../docs/schema/workspace.schema.json"

// wireTypes names the Go type whose fields make each $defs entry's
// properties: the record type itself, or the type its MarshalJSON writes.
var wireTypes = map[string]reflect.Type{
	"Subject":         reflect.TypeFor[Subject](),
	"Artifact":        reflect.TypeFor[artifactJSON](),
	"ArtifactPage":    reflect.TypeFor[ArtifactPage](),
	"TaskResult":      reflect.TypeFor[TaskResult](),
	"Task":            reflect.TypeFor[Task](),
	"TaskPage":        reflect.TypeFor[TaskPage](),
	"Note":            reflect.TypeFor[Note](),
	"NotePage":        reflect.TypeFor[NotePage](),
	"Lease":           reflect.TypeFor[Lease](),
	"Event":           reflect.TypeFor[Event](),
	"EventPage":       reflect.TypeFor[EventPage](),
	"Status":          reflect.TypeFor[Status](),
	"OpResult":        reflect.TypeFor[OpResult](),
	"BatchResult":     reflect.TypeFor[BatchResult](),
	"Msg":             reflect.TypeFor[Msg](),
	"MsgAck":          reflect.TypeFor[MsgAck](),
	"InboxPage":       reflect.TypeFor[InboxPage](),
	"Message":         reflect.TypeFor[messageJSON](),
	"ConflictError":   reflect.TypeFor[ConflictError](),
	"LockedError":     reflect.TypeFor[LockedError](),
	"StaleFenceError": reflect.TypeFor[StaleFenceError](),
	"CompactedError":  reflect.TypeFor[CompactedError](),
	"InvalidError":    reflect.TypeFor[InvalidError](),
	"SchemaError":     reflect.TypeFor[SchemaError](),
	"ArchiveStats":    reflect.TypeFor[ArchiveStats](),
}

// helperDefs are $defs that are parts of records, not records.
var helperDefs = []string{"Time", "Labels", "TaskStatus", "ArchiveLine"}

type schemaDoc struct {
	ID   string `json:"$id"`
	Defs map[string]struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Additional json.RawMessage            `json:"additionalProperties"`
	} `json:"$defs"`
}

func loadSchema(t *testing.T) (schemaDoc, *jsonschema.Compiler) {
	t.Helper()
	raw, err := os.ReadFile(schemaFile)
	require.NoError(t, err)
	var doc schemaDoc
	require.NoError(t, json.Unmarshal(raw, &doc))
	parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat() // date-time is checked, not only annotated
	require.NoError(t, c.AddResource(doc.ID, parsed))
	return doc, c
}

// jsonNames lists the JSON field names encoding/json gives t's fields.
func jsonNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case name == "-" || !f.IsExported() && !f.Anonymous:
			continue
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			names = append(names, jsonNames(f.Type)...)
			continue
		case name == "":
			name = f.Name
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// TestSchemaDescribesEveryRecordField fails when a record type gains (or
// loses) a JSON field that the schema does not list, and when a record
// type has no $defs entry or an entry allows fields it does not list.
func TestSchemaDescribesEveryRecordField(t *testing.T) {
	doc, _ := loadSchema(t)
	for name, typ := range wireTypes {
		t.Run(name, func(t *testing.T) {
			def, ok := doc.Defs[name]
			require.True(t, ok, "the schema has no $defs/%s", name)
			assert.Equal(t, "false", string(def.Additional), "$defs/%s must set additionalProperties: false", name)
			var props []string
			for p := range def.Properties {
				props = append(props, p)
			}
			slices.Sort(props)
			assert.Equal(t, jsonNames(typ), props, "JSON fields of %s vs properties of $defs/%s", typ, name)
		})
	}
	for name := range doc.Defs {
		_, record := wireTypes[name]
		assert.True(t, record || slices.Contains(helperDefs, name), "$defs/%s is neither a record type nor a known helper", name)
	}
}

// TestRecordsValidateAgainstTheSchema marshals every record type, full and
// at its edges, and validates the JSON against its $defs entry.
func TestRecordsValidateAgainstTheSchema(t *testing.T) {
	doc, c := loadSchema(t)
	type sample struct {
		def  string
		name string
		v    any
	}
	var samples []sample
	for def, v := range fullSamples() {
		samples = append(samples, sample{def, "full", v})
	}
	for _, e := range edgeCases() {
		samples = append(samples, sample{reflect.TypeOf(e.in).Name(), e.name, e.in})
	}
	covered := map[string]bool{}
	for _, s := range samples {
		t.Run(s.def+"/"+s.name, func(t *testing.T) {
			sch, err := c.Compile(doc.ID + "#/$defs/" + s.def)
			require.NoError(t, err)
			b, err := json.Marshal(s.v)
			require.NoError(t, err)
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			require.NoError(t, err)
			assert.NoError(t, sch.Validate(inst), "%s", b)
			covered[s.def] = true
		})
	}
	for name := range wireTypes {
		assert.True(t, covered[name], "no sample of %s", name)
	}
}

// TestSchemaRefusesWhatTheShapeForbids keeps the schema strict: nulls,
// unknown fields and Go field names fail.
func TestSchemaRefusesWhatTheShapeForbids(t *testing.T) {
	doc, c := loadSchema(t)
	cases := []struct{ def, json string }{
		{"Task", `{"ID":"x"}`},
		{"Artifact", `{"id":"x","name":"a","kind":"output","owner":"o","version":1,"content_type":"t","sha256":"` + strings.Repeat("0", 64) + `","size":0,"labels":null,"task_id":"","created_by":"","updated_by":""}`},
		{"Lease", `{"resource":"r","owner":"o","token":1,"color":"red"}`},
		{"Event", `{"seq":1,"time":"yesterday","actor":"a","type":"x","subject":{"kind":"","id":"","name":""},"version":0,"message":""}`},
		{"Artifact", `{"id":"x","name":"a","kind":"output","owner":"o","version":1,"content_type":"t","sha256":"` + strings.Repeat("0", 64) + `","size":0,"labels":{},"task_id":"","created_by":"","updated_by":"","content_encoding":"base64"}`},
	}
	for _, cs := range cases {
		sch, err := c.Compile(doc.ID + "#/$defs/" + cs.def)
		require.NoError(t, err)
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(cs.json))
		require.NoError(t, err)
		assert.Error(t, sch.Validate(inst), "%s: %s", cs.def, cs.json)
	}
}
