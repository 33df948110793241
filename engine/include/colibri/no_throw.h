// NoThrow: runs a body that returns Status or Result<T> and turns an
// exception it throws into an error value. For bodies run on threads of our
// own (replay --jobs, the cache sweep, compare's helper, the model writer's
// fillers): an exception escaping a std::thread calls std::terminate, which
// the CLI's top-level handler cannot catch. Header-only, stateless,
// thread-safe.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "colibri/status.h"

namespace colibri {

template <typename Body>
auto NoThrow(const Body& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Status::Internal("out of memory: the sizes asked for need more memory than this process could allocate");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("internal error (an exception on a worker thread): ") + e.what());
  } catch (...) {
    return Status::Internal("internal error (an exception on a worker thread)");
  }
}

}  // namespace colibri
