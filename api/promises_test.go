package api

// What package api promises (its doc comment), and the test that pins
// each:
//
//   - Every JSON name is lowercase with underscores:
//     TestJSONNamesAreLowercase.
//   - It imports no engine package, so a program that only talks to a
//     server links api and Arrow, not the object-store SDKs:
//     TestClientLinksNoEngine.
//   - The OpenAPI document the server serves describes the same shapes: in
//     package server, TestOpenAPIMatchesTheServer.
//   - A field a reader cannot know is absent or null, never a zero: in
//     package server, TestReplicasWriteThroughShardsOfTheirOwn (LSM stats
//     of a shard the server does not own carry no memtable or merge
//     fields, and no pending rows unasked); the other types' absent fields
//     have no test yet.
