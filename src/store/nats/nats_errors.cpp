// See nats_errors.hpp.
#include "store/nats/nats_errors.hpp"

#include <fmt/format.h>

namespace etlc::nats_detail {

NatsFailure NatsFailure::capture(natsStatus status, jsErrCode js_code, const Redactor& redactor) {
  NatsFailure f;
  f.status = status;
  f.js_code = js_code;
  natsStatus last = NATS_OK;
  const char* text = nats_GetLastError(&last);
  // nats.c keeps the text of the last error that set one; it may belong to an earlier call.
  if (text != nullptr && last == status) f.detail = redactor.apply(text);
  return f;
}

std::string NatsFailure::describe() const {
  std::string out = natsStatus_GetText(status);
  if (js_code != 0) out += fmt::format(", JetStream error {}", static_cast<int>(js_code));
  if (!detail.empty()) out += fmt::format(": {}", detail);
  return out;
}

StoreErrc classify(const NatsFailure& f, OpKind kind) {
  switch (f.status) {
    case NATS_CONNECTION_CLOSED:
      return StoreErrc::closed;
    // Sent, no answer: the server may have applied (or apply later, from the reconnect buffer).
    case NATS_TIMEOUT:
    case NATS_CONNECTION_DISCONNECTED:
      return kind == OpKind::write ? StoreErrc::unknown_outcome : StoreErrc::unavailable;
    // The server answered that nothing took the request, or nothing left this process.
    case NATS_NO_RESPONDERS:
    case NATS_INSUFFICIENT_BUFFER:
    case NATS_NOT_YET_CONNECTED:
    case NATS_NO_SERVER:
      return StoreErrc::unavailable;
    case NATS_INVALID_ARG:
    case NATS_INVALID_SUBJECT:
    case NATS_MAX_PAYLOAD:
      return StoreErrc::invalid_argument;
    case NATS_ERR:
      // A JetStream error reply means the server rejected the request: nothing was stored.
      if (f.js_code != 0) return StoreErrc::unavailable;
      return kind == OpKind::write ? StoreErrc::unknown_outcome : StoreErrc::unavailable;
    default:
      // Anything else after a write may have happened after the message left: be conservative.
      return kind == OpKind::write ? StoreErrc::unknown_outcome : StoreErrc::unavailable;
  }
}

void throw_failure(const NatsFailure& failure, OpKind kind, std::string_view what) {
  throw StoreError(classify(failure, kind), fmt::format("{}: {}", what, failure.describe()));
}

}  // namespace etlc::nats_detail
