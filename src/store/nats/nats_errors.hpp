// Mapping nats.c failures to StoreError codes (see the error list in etlc/nats_store.hpp).
#pragma once

#include <nats/nats.h>

#include <string>
#include <string_view>

#include "etlc/store.hpp"
#include "store/nats/nats_redact.hpp"

namespace etlc::nats_detail {

// What the failed call was: a read or setup never changes the store, a write may have.
enum class OpKind : std::uint8_t { read, write };

// A failed nats.c call, captured right after it returned (nats.c keeps the detailed text in a
// thread-local that the next call overwrites).
struct NatsFailure {
  natsStatus status = NATS_OK;
  jsErrCode js_code = static_cast<jsErrCode>(0);
  std::string detail;  // nats_GetLastError text, redacted

  static NatsFailure capture(natsStatus status, jsErrCode js_code, const Redactor& redactor);
  // "<status text>[, JetStream error N][: detail]"
  std::string describe() const;
};

// The StoreErrc for a failed call of kind `kind`.
StoreErrc classify(const NatsFailure& failure, OpKind kind);

// Throws StoreError(classify(...)) with "<what>: <describe()>".
[[noreturn]] void throw_failure(const NatsFailure& failure, OpKind kind, std::string_view what);

}  // namespace etlc::nats_detail
