// A free TCP port on 127.0.0.1, for rendezvous and for test servers.
//
// Guarantees: the port was bindable a moment ago (bind to port 0, read it, close).
// Caveats: another process may take it before the caller binds it; callers that can should
//   bind port 0 themselves and report the port.
#pragma once

namespace flotilla::process {

// Throws std::runtime_error when no socket can be bound.
int pick_free_port();

}  // namespace flotilla::process
