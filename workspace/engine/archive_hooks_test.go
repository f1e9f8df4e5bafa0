package engine

// SetImportChunk makes Import commit every records records (or bytes of
// content), so tests can reach the several-transactions path with small
// archives. It returns a function that restores the defaults.
func SetImportChunk(records int, bytes int64) (restore func()) {
	r, b := importChunkRecords, importChunkBytes
	importChunkRecords, importChunkBytes = records, bytes
	return func() { importChunkRecords, importChunkBytes = r, b }
}
