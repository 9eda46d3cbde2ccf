// NatsStore::delete_bucket (etlc delete): removes the bucket's stream, then closes the store.
#include <fmt/format.h>

#include "etlc/nats_store.hpp"
#include "store/nats/nats_core.hpp"
#include "store/nats/nats_errors.hpp"

namespace etlc {

void NatsStore::delete_bucket() {
  const std::string what = fmt::format("deleting bucket '{}'", core_->bucket());
  core_->require_connected(what);
  core_->break_watches("the bucket is being deleted");
  jsOptions opts = core_->request_options();
  jsErrCode jerr = static_cast<jsErrCode>(0);
  const natsStatus s = js_DeleteStream(core_->js(), core_->stream().c_str(), &opts, &jerr);
  if (s != NATS_OK && jerr != JSStreamNotFoundErr) {
    nats_detail::throw_failure(nats_detail::NatsFailure::capture(s, jerr, core_->redactor()),
                               nats_detail::OpKind::write, what);
  }
  close();
}

}  // namespace etlc
