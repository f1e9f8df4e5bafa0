// Package wire is the HTTP API's shape, shared by both ends: the request
// bodies, the batch op codes, the problem body of every error answer and
// the one error table (errors.go): per problem code, its HTTP status, its
// sentinel, wsctl's exit code and the encode/decode pair of its typed
// error, from the workspace's errors to codes and back.
//
// The server decodes these bodies, the remote backend encodes them, MCP
// names its error classes with these codes, wsctl exits by them, and the
// benchmarks send them, so no two of them can disagree about a field or a
// code. Records go out in the workspace types' own JSON (their snake_case
// tags); the types here are only what the workspace takes as input, which
// has no JSON of its own.
//
// The package imports only workspace and the standard library, so a
// client links no server. Struct tags such as doc:"..." and minimum:"1"
// describe the fields to the server's OpenAPI generator; they are plain
// tags and need nothing imported.
package wire
