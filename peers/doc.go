// Package peers joins the mounts of one source on several hosts into one
// partitioned cache: every item has one owner among the live members, found
// by rendezvous (highest-random-weight) hashing of the item key, and a
// member that does not own an item asks the owner for it over HTTP instead
// of reading the backend.
//
// Invariants:
//   - Ownership depends only on the item key and the set of live members, so
//     members that agree on who is live agree on every owner, and a member
//     leaving moves only the items it owned.
//   - Every request to a member carries an HMAC-SHA256 token of the method,
//     the path with query and a timestamp under the group's shared secret;
//     a request without a valid token gets 401 and is counted.
//   - A member serves only items its ItemSource knows (the mount's dataset
//     at that version); paths that are not clean, relative and slash
//     separated are refused before the source is asked.
//   - Every item carries its CRC32C (Castagnoli) in a header and the client
//     verifies it: a corrupted or truncated item is an error, never data.
//   - A peer fetch never blocks a read for longer than the item timeout: a
//     peer that fails to connect or to answer in time is marked down, its
//     items are owned by the remaining live members until a background
//     health probe finds it up again. Errors from peers are returned to the
//     caller, which falls back to the backend.
//   - Requests in flight to one peer are bounded; a fetch beyond the bound
//     waits at most the item timeout for a slot.
//
// The package imports nothing of stallfs: the mount implements ItemSource
// and consumes Group through its own small interface.
package peers
