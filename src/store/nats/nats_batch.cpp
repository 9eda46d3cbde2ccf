// NatsStore::create_many: a batch of creates as asynchronous JetStream publishes (nats.c
// js_PublishMsgAsync), at most NatsStoreOptions::creates_in_flight unacknowledged at a time.
//
// Each request's first publish is the one create() would send (the same guard, the same
// headers: a watch's gap detection reads the expected-last-sequence header of every message).
// Its acknowledgement decides it: a stream sequence is a create at that revision; a lost guard
// (the key has a message: a live value or a delete marker; a duplicate message id) continues as
// create() continues after such an answer (finish_create, one request after the other, once the
// pipeline is drained); no answer within op_timeout_ms, or a failed one, is the error create()
// would throw for it (unknown_outcome when the write may apply). After the first such failure,
// or when the connection is down, nothing more is sent: the requests not sent are unavailable
// (so a server that stops answering costs about two op_timeout_ms, not one per window of
// requests). Only the first request on a key is pipelined; later ones on the same key run as
// single creates after it, so requests on one key are answered in order.
//
// Every call has its own JetStream context (nats.c keeps the pending acknowledgements per
// context), so concurrent calls never see each other's acknowledgements.
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "etlc/detail/mutex.hpp"
#include "etlc/nats_store.hpp"
#include "log.hpp"
#include "store/nats/nats_core.hpp"
#include "store/nats/nats_create.hpp"

namespace etlc {

namespace nats_detail {

namespace {

// What the pipeline learnt about one request.
struct Answer {
  enum class Kind : std::uint8_t {
    unsent,    // never published: unavailable
    sent,      // published, no acknowledgement yet
    created,   // acknowledged at `revision`
    lost,      // the guard failed (`failed`): decided by finish_create
    failed,    // `error`
    deferred,  // a later request on a key already in the pipeline: a single create
  };
  Kind kind = Kind::unsent;
  std::uint64_t expected = 0;  // the guard of the pipelined publish
  std::uint64_t revision = 0;
  Published failed;
  StoreErrc error = StoreErrc::unavailable;
  std::string detail;  // why, for `failed`
};

class Pipeline {
 public:
  Pipeline(Core& core, std::span<const CreateRequest> requests)
      : core_(core), requests_(requests), answers_(requests.size()) {}
  ~Pipeline() = default;
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Publishes, waits for every acknowledgement (bounded), and returns the answers. False if the
  // acknowledgement handler may still run (the Pipeline must then outlive this call).
  bool run() ETLC_EXCLUDES(mu_);
  std::vector<Answer> answers() ETLC_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return answers_;
  }

 private:
  // Marks later requests on a key already pipelined as deferred; returns the pipelined ones.
  std::vector<std::size_t> pipelined() ETLC_EXCLUDES(mu_);
  JsPtr context();
  // Waits (bounded) for room in the window; false if sending should stop.
  bool wait_for_room() ETLC_EXCLUDES(mu_);
  // Sends request `i`; false if nothing more should be sent (it may be unsent or failed).
  bool send(jsCtx* js, std::size_t i, jsPubOptions& po) ETLC_EXCLUDES(mu_);
  // Waits until no acknowledgement is pending; the ones that never came become unknown.
  bool drain(jsCtx* js) ETLC_EXCLUDES(mu_);
  void settle(natsMsg* msg, const jsPubAck* ack, const jsPubAckErr* err) ETLC_EXCLUDES(mu_);
  static void on_ack(jsCtx* js, natsMsg* msg, jsPubAck* ack, jsPubAckErr* err, void* closure);

  Core& core_;
  const std::span<const CreateRequest> requests_;
  Mutex mu_;
  CondVar room_;  // an acknowledgement freed a place in the window
  std::vector<Answer> answers_ ETLC_GUARDED_BY(mu_);
  bool trouble_ ETLC_GUARDED_BY(mu_) = false;  // an acknowledgement failed or never came
  // Messages nats.c holds for us, to the request each carries (at most creates_in_flight).
  std::unordered_map<const natsMsg*, std::size_t> in_flight_ ETLC_GUARDED_BY(mu_);
};

std::vector<std::size_t> Pipeline::pipelined() {
  std::vector<std::size_t> out;
  out.reserve(requests_.size());
  std::unordered_set<std::string_view> seen;
  MutexLock lock(mu_);
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    if (seen.insert(requests_[i].key).second) {
      out.push_back(i);
    } else {
      answers_[i].kind = Answer::Kind::deferred;
    }
  }
  return out;
}

JsPtr Pipeline::context() {
  jsOptions jo = core_.request_options();
  // No MaxPending: the window is ours (wait_for_room), so a refused publish is never a stall.
  jo.PublishAsync.AckHandler = &Pipeline::on_ack;
  jo.PublishAsync.AckHandlerClosure = this;
  jsCtx* js = nullptr;
  if (natsConnection_JetStream(&js, core_.connection(), &jo) != NATS_OK) {
    throw StoreError(StoreErrc::unavailable, "create_many: nats.c could not create a context");
  }
  return JsPtr(js);
}

bool Pipeline::wait_for_room() {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(core_.options().op_timeout_ms);
  MutexLock lock(mu_);
  while (!trouble_ && in_flight_.size() >= core_.options().creates_in_flight) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    room_.wait_until(mu_, deadline);
  }
  return !trouble_;
}

// What a refused js_PublishMsgAsync means: nats.c neither registered nor buffered the message
// for these statuses; for any other (a socket write that failed part-way) bytes may have left.
StoreErrc refused(natsStatus s) {
  switch (s) {
    case NATS_CONNECTION_CLOSED:
      return StoreErrc::closed;
    case NATS_INSUFFICIENT_BUFFER:
    case NATS_DRAINING:
    case NATS_NO_SERVER_SUPPORT:
    case NATS_NO_MEMORY:
      return StoreErrc::unavailable;
    default:
      return StoreErrc::unknown_outcome;
  }
}

bool Pipeline::send(jsCtx* js, std::size_t i, jsPubOptions& po) {
  const CreateRequest& r = requests_[i];
  if (!wait_for_room()) return false;
  if (natsConnection_Status(core_.connection()) != NATS_CONN_STATUS_CONNECTED) {
    return false;  // nothing queued in nats.c's reconnect buffer while we know we are down
  }
  const std::uint64_t expected = core_.marker_hints().get(r.key);
  MsgPtr msg = core_.write_message(r.key, r.value, expected, false, "create_many");
  natsMsg* raw = msg.release();
  {
    MutexLock lock(mu_);  // before the publish: its acknowledgement may come first
    in_flight_.emplace(raw, i);
    answers_[i].kind = Answer::Kind::sent;
    answers_[i].expected = expected;
  }
  core_.count_publishes(1);
  const natsStatus s = js_PublishMsgAsync(js, &raw, &po);
  if (s == NATS_OK) return true;  // nats.c owns the message (raw is null)
  // Refused: nats.c will never answer for it, and the message is ours again.
  const NatsFailure f = NatsFailure::capture(s, static_cast<jsErrCode>(0), core_.redactor());
  MutexLock lock(mu_);
  in_flight_.erase(raw);
  answers_[i].kind = Answer::Kind::failed;
  answers_[i].error = refused(s);
  answers_[i].detail = "publish refused: " + f.describe();
  natsMsg_Destroy(raw);
  return false;
}

void Pipeline::on_ack(jsCtx*, natsMsg* msg, jsPubAck* ack, jsPubAckErr* err, void* closure) {
  static_cast<Pipeline*>(closure)->settle(msg, ack, err);
}

// Runs on nats.c's thread for the context's reply subscription.
void Pipeline::settle(natsMsg* msg, const jsPubAck* ack, const jsPubAckErr* err) {
  MsgPtr owned(msg);  // the handler owns the message it is given
  MutexLock lock(mu_);
  auto it = in_flight_.find(msg);
  if (it == in_flight_.end()) return;  // not ours (cannot happen: one context per call)
  Answer& a = answers_[it->second];
  in_flight_.erase(it);
  room_.notify_one();
  const natsStatus status = err != nullptr ? err->Err : NATS_OK;
  const jsErrCode jerr = err != nullptr ? err->ErrCode : static_cast<jsErrCode>(0);
  const std::string_view text = err != nullptr && err->ErrText != nullptr ? err->ErrText : "";
  if (auto judged = Core::judge_reply(status, jerr, err == nullptr ? ack : nullptr, text)) {
    a.kind = judged->ok ? Answer::Kind::created : Answer::Kind::lost;
    a.revision = judged->revision;
    a.failed = *judged;
    return;
  }
  NatsFailure f;
  f.status = err != nullptr ? status : NATS_ERR;
  f.js_code = jerr;
  f.detail = core_.redactor().apply(std::string(text));
  a.kind = Answer::Kind::failed;
  a.error = classify(f, OpKind::write);
  a.detail = f.describe();
  trouble_ = true;
}

bool Pipeline::drain(jsCtx* js) {
  jsPubOptions po;
  jsPubOptions_Init(&po);
  // Every publish has its own op_timeout_ms timer in nats.c; this bounds the wait for the last.
  po.MaxWait = 2 * core_.options().op_timeout_ms + 1000;
  if (js_PublishAsyncComplete(js, &po) == NATS_OK) return true;
  natsMsgList pending{};
  if (js_PublishAsyncGetPendingList(&pending, js) == NATS_OK) {
    MutexLock lock(mu_);
    for (int k = 0; k < pending.Count; ++k) {
      auto it = in_flight_.find(pending.Msgs[k]);
      if (it == in_flight_.end()) continue;
      Answer& a = answers_[it->second];
      a.kind = Answer::Kind::failed;
      a.error = StoreErrc::unknown_outcome;
      a.detail = "no acknowledgement (nats.c did not time the publish out)";
      in_flight_.erase(it);
    }
  }
  natsMsgList_Destroy(&pending);
  // Handlers already running still count as pending: wait until they returned.
  return js_PublishAsyncComplete(js, &po) == NATS_OK;
}

bool Pipeline::run() {
  const std::vector<std::size_t> order = pipelined();
  JsPtr js = context();
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = core_.options().op_timeout_ms;  // nats.c times each acknowledgement out
  for (std::size_t i : order) {
    if (!send(js.get(), i, po)) break;
  }
  const bool drained = drain(js.get());
  if (!drained) {
    js.release();  // NOLINT(bugprone-unused-return-value): a handler may still use it
    return false;
  }
  return true;
}

// The outcome of one request from its answer; the lost and deferred ones are finished here.
CreateOutcome finish(Core& core, const CreateRequest& r, Answer& a) {
  CreateOutcome out;
  try {
    switch (a.kind) {
      case Answer::Kind::created:
        core.live_revisions().insert(a.revision);
        out.result = WriteResult{true, a.revision};
        return out;
      case Answer::Kind::lost:
        out.result = finish_create(core, r.key, r.value, a.expected, a.failed);
        return out;
      case Answer::Kind::deferred:
        out.result = create_key(core, r.key, r.value);
        return out;
      case Answer::Kind::failed:
        throw StoreError(a.error, fmt::format("create '{}': {}", r.key, a.detail));
      case Answer::Kind::sent:  // only when a handler never returned (see create_many)
        throw StoreError(StoreErrc::unknown_outcome,
                         fmt::format("create '{}': no acknowledgement", r.key));
      case Answer::Kind::unsent:
        break;
    }
    throw StoreError(StoreErrc::unavailable,
                     fmt::format("create '{}': not sent (the connection is down, or an earlier "
                                 "create of the batch failed)",
                                 r.key));
  } catch (const StoreError& e) {
    if (e.code() != StoreErrc::unavailable && e.code() != StoreErrc::unknown_outcome) throw;
    out.error = e.code();
  }
  return out;
}

}  // namespace

}  // namespace nats_detail

std::vector<CreateOutcome> NatsStore::create_many(std::span<const CreateRequest> requests) {
  validate_create_batch(requests);
  if (requests.empty()) return {};
  std::vector<CreateOutcome> out(requests.size());
  try {
    core_->require_connected("create_many");
  } catch (const StoreError& e) {
    if (e.code() != StoreErrc::unavailable) throw;
    for (auto& o : out) o.error = StoreErrc::unavailable;
    return out;
  }
  auto pipeline = std::make_unique<nats_detail::Pipeline>(*core_, requests);
  const bool drained = pipeline->run();
  std::vector<nats_detail::Answer> answers = pipeline->answers();
  if (!drained) {
    // An acknowledgement handler still runs after the bounded wait: the pipeline and its
    // context stay allocated for it (a leak in a case that should not happen, never a use after
    // free). Its unanswered creates are unknown outcomes.
    log().error(
        "nats: bucket '{}': create_many: nats.c did not finish an acknowledgement "
        "handler in time",
        core_->bucket());
    (void)pipeline.release();
  }
  // The lost and deferred requests finish one after the other; once one of them cannot reach
  // the server the rest are not tried (nothing of theirs was applied): each would wait its own
  // op_timeout_ms.
  bool down = false;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    using Kind = nats_detail::Answer::Kind;
    const bool single = answers[i].kind == Kind::lost || answers[i].kind == Kind::deferred;
    if (single && down) {
      out[i].error = StoreErrc::unavailable;
      continue;
    }
    out[i] = nats_detail::finish(*core_, requests[i], answers[i]);
    if (single && out[i].error) down = true;
  }
  return out;
}

}  // namespace etlc
