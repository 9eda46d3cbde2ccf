// Test doubles for the Driver: a scripted member (MemberApi) whose events the test pushes
// and whose answers the test chooses, and a scripted source whose lanes record every call.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "etlc/driver.hpp"
#include "etlc/member_api.hpp"
#include "etlc/split_source.hpp"

namespace etlc::testing {

// One call the driver made on the member.
struct MemberCall {
  std::string op;  // commit, complete, fail, release_drained, decline_revoke, shutdown, ...
  std::string id;
  SplitProgress progress;
  std::string reason;
  std::uint64_t epoch = 0;  // the tenancy the driver named
};

class ScriptedMember : public MemberApi {
 public:
  using Answer = std::function<CommitResult(const MemberCall&)>;

  explicit ScriptedMember(std::uint32_t max_in_flight = 4) : max_in_flight_(max_in_flight) {}

  void push(Event e) {
    {
      std::lock_guard lk(mu_);
      events_.push_back(std::move(e));
    }
    cv_.notify_all();
  }
  // Chooses the answer to commit/complete/fail/release_drained (default: durable).
  void set_answer(Answer a) {
    std::lock_guard lk(mu_);
    answer_ = std::move(a);
  }
  std::vector<MemberCall> calls() const {
    std::lock_guard lk(mu_);
    return calls_;
  }
  std::vector<MemberCall> calls(const std::string& op) const {
    std::vector<MemberCall> out;
    for (auto& c : calls()) {
      if (c.op == op) out.push_back(c);
    }
    return out;
  }
  std::vector<std::string> ops() const {
    std::vector<std::string> out;
    for (auto& c : calls()) out.push_back(c.op);
    return out;
  }
  bool started() const { return started_; }

  // MemberApi
  void start() override { started_ = true; }
  std::optional<Event> wait_event(std::chrono::milliseconds timeout) override {
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, timeout, [&] { return !events_.empty(); });
    if (events_.empty()) return std::nullopt;
    Event e = std::move(events_.front());
    events_.pop_front();
    return e;
  }
  CommitResult commit(std::string_view id, const SplitProgress& p, std::uint64_t epoch) override {
    return record({"commit", std::string(id), p, {}, epoch});
  }
  CommitResult complete(std::string_view id, const SplitProgress& p, std::uint64_t epoch) override {
    return record({"complete", std::string(id), p, {}, epoch});
  }
  CommitResult fail(std::string_view id, std::string_view reason, std::uint64_t epoch) override {
    return record({"fail", std::string(id), {}, std::string(reason), epoch});
  }
  CommitResult release_drained(std::string_view id, std::uint64_t epoch) override {
    return record({"release_drained", std::string(id), {}, {}, epoch});
  }
  // A cut: `reason` holds the residual's descriptor.
  CommitResult split(std::string_view id, const SplitProgress& p, const SplitResidual& residual,
                     std::uint64_t epoch) override {
    return record({"split", std::string(id), p, residual.descriptor, epoch});
  }
  void decline_revoke(std::string_view id, std::uint64_t epoch) override {
    record({"decline_revoke", std::string(id), {}, {}, epoch});
  }
  void shutdown() override { record({"shutdown", {}, {}, {}}); }
  void abandon() override { record({"abandon", {}, {}, {}}); }
  std::string instance_id() const override { return "scripted-member"; }
  std::uint32_t max_in_flight() const override { return max_in_flight_; }
  bool session_live(std::uint64_t session) const override {
    std::lock_guard lk(mu_);
    ++liveness_checks_;
    return lapsed_.count(session) == 0;
  }
  // From now on session `session` is not live (as after a lapse, for good).
  void lapse_session(std::uint64_t session) {
    std::lock_guard lk(mu_);
    lapsed_.insert(session);
  }
  std::uint64_t liveness_checks() const {
    std::lock_guard lk(mu_);
    return liveness_checks_;
  }

 private:
  CommitResult record(MemberCall c) {
    Answer a;
    {
      std::lock_guard lk(mu_);
      calls_.push_back(c);
      a = answer_;
    }
    if (a && c.op != "decline_revoke" && c.op != "shutdown" && c.op != "abandon") return a(c);
    return {CommitStatus::durable, {}};
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  std::vector<MemberCall> calls_;
  Answer answer_;
  std::set<std::uint64_t> lapsed_;
  mutable std::uint64_t liveness_checks_ = 0;
  std::atomic<bool> started_{false};
  std::uint32_t max_in_flight_;
};

// How a scripted lane behaves. Its split has `records` records; each step hands one over; the
// sink is "durable" up to what was handed over (watermark = records handed over, counted from
// the resume point).
struct LaneScript {
  std::uint64_t records = 5;
  std::optional<std::uint64_t> poison_at;  // step() reports poison when at this watermark
  std::optional<std::uint64_t> throw_at;   // step() throws when at this watermark
  std::optional<std::uint64_t> fenced_at;  // step() reports a sink refusal at this watermark
  // Runs inside step() right before the "sink write" (the lapse test pauses the member here).
  std::function<void()> before_write;
  bool throw_on_open = false;
  bool decline_drain = false;
  bool can_split = false;  // split() cuts (else it declines, the default)
  // Runs inside each step (threaded tests slow steps down to measure concurrency).
  std::function<void()> in_step;

  LaneScript& poison(std::uint64_t at) {
    poison_at = at;
    return *this;
  }
  LaneScript& throwing(std::uint64_t at) {
    throw_at = at;
    return *this;
  }
  LaneScript& fenced(std::uint64_t at) {
    fenced_at = at;
    return *this;
  }
  LaneScript& unopenable() {
    throw_on_open = true;
    return *this;
  }
  LaneScript& declining() {
    decline_drain = true;
    return *this;
  }
  LaneScript& splittable() {
    can_split = true;
    return *this;
  }
  LaneScript& slow(std::chrono::milliseconds per_step) {
    in_step = [per_step] { std::this_thread::sleep_for(per_step); };
    return *this;
  }
};

inline LaneScript lane(std::uint64_t records) {
  LaneScript s;
  s.records = records;
  return s;
}

class ScriptedSource final : public SplitSource {
 public:
  // Every call of every lane, in order: "open s1@5", "step s1", "durable s1", "drain s1",
  // "close s1 completed".
  std::vector<std::string> journal() const {
    std::lock_guard lk(mu_);
    return journal_;
  }
  std::size_t count(const std::string& prefix) const {
    auto j = journal();
    return static_cast<std::size_t>(std::count_if(
        j.begin(), j.end(), [&](const std::string& s) { return s.rfind(prefix, 0) == 0; }));
  }
  std::vector<LaneContext> opened() const {
    std::lock_guard lk(mu_);
    return opened_;
  }
  // The stop token of the last lane opened for `id`.
  std::stop_token stop_of(const std::string& id) const {
    std::lock_guard lk(mu_);
    return stops_.at(id);
  }
  void script(const std::string& id, LaneScript s) {
    std::lock_guard lk(mu_);
    scripts_[id] = std::move(s);
  }
  int max_concurrent_steps() const { return max_concurrent_; }

  std::unique_ptr<Lane> open(const LaneContext& ctx) override;

  void log(std::string line) {
    std::lock_guard lk(mu_);
    journal_.push_back(std::move(line));
  }
  void enter_step() {
    int now = ++concurrent_;
    int seen = max_concurrent_.load();
    while (now > seen && !max_concurrent_.compare_exchange_weak(seen, now)) {
    }
  }
  void leave_step() { --concurrent_; }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> journal_;
  std::vector<LaneContext> opened_;
  std::map<std::string, std::stop_token> stops_;
  std::map<std::string, LaneScript> scripts_;
  std::atomic<int> concurrent_{0};
  std::atomic<int> max_concurrent_{0};
};

class ScriptedLane final : public Lane {
 public:
  ScriptedLane(ScriptedSource& src, LaneContext ctx, LaneScript script)
      : src_(src), ctx_(std::move(ctx)), script_(std::move(script)), pos_(ctx_.resume.watermark) {}

  StepResult step() override {
    src_.log("step " + ctx_.spec.id);
    src_.enter_step();
    struct Leave {
      ScriptedSource& s;
      ~Leave() { s.leave_step(); }
    } leave{src_};
    if (script_.in_step) script_.in_step();
    if (script_.throw_at && pos_ == *script_.throw_at) throw std::runtime_error("boom");
    if (script_.poison_at && pos_ == *script_.poison_at) {
      return StepResult::poisoned("bad record at " + std::to_string(pos_));
    }
    if (script_.fenced_at && pos_ == *script_.fenced_at) {
      return StepResult::fenced("fence at a newer epoch");
    }
    if (script_.before_write) script_.before_write();
    if (ctx_.live && !ctx_.live()) {
      src_.log("lapsed " + ctx_.spec.id);  // wrote nothing
      return StepResult::more();
    }
    if (pos_ < script_.records) {
      ++pos_;
      src_.log("write " + ctx_.spec.id + "@" + std::to_string(pos_));
    }
    return pos_ >= script_.records ? StepResult::end() : StepResult::more();
  }
  SplitProgress durable_progress() override {
    src_.log("durable " + ctx_.spec.id);
    return progress();
  }
  std::optional<SplitProgress> drain() override {
    src_.log("drain " + ctx_.spec.id);
    if (script_.decline_drain) return std::nullopt;
    return progress();
  }
  // Cuts at the first record at or after `keep` of what is left: "records a..b" goes to the
  // residual, and the state names the new end.
  std::optional<SplitResidual> split(double keep) override {
    src_.log("split " + ctx_.spec.id);
    if (!script_.can_split || script_.records - pos_ < 2) return std::nullopt;
    const auto left = script_.records - pos_;
    auto kept = static_cast<std::uint64_t>(static_cast<double>(left) * keep + 0.999);
    kept = std::clamp<std::uint64_t>(kept, 1, left - 1);
    const std::uint64_t cut = pos_ + kept;
    SplitResidual r{"records " + std::to_string(cut) + ".." + std::to_string(script_.records),
                    script_.records - cut};
    script_.records = cut;
    cut_ = true;
    return r;
  }
  void close(LaneEnd end) override {
    src_.log("close " + ctx_.spec.id + " " + std::string(to_string(end)));
  }

 private:
  ScriptedSource& src_;
  LaneContext ctx_;
  LaneScript script_;
  std::uint64_t pos_;
  bool cut_ = false;

  SplitProgress progress() const {
    std::string state = "state@" + std::to_string(pos_);
    if (cut_) state += " end=" + std::to_string(script_.records);
    return SplitProgress{pos_, std::move(state)};
  }
};

inline std::unique_ptr<Lane> ScriptedSource::open(const LaneContext& ctx) {
  LaneScript script;
  {
    std::lock_guard lk(mu_);
    journal_.push_back("open " + ctx.spec.id + "@" + std::to_string(ctx.resume.watermark));
    opened_.push_back(ctx);
    stops_[ctx.spec.id] = ctx.stop;
    if (auto it = scripts_.find(ctx.spec.id); it != scripts_.end()) script = it->second;
  }
  if (script.throw_on_open) throw std::runtime_error("cannot open " + ctx.spec.id);
  return std::make_unique<ScriptedLane>(*this, ctx, script);
}

inline SplitGranted grant(const std::string& id, std::uint64_t epoch = 1,
                          std::uint64_t watermark = 0, std::uint64_t session = 1) {
  return SplitGranted{
      SplitSpec{id, "descriptor of " + id, 1}, epoch,
      SplitProgress{watermark, watermark ? "state@" + std::to_string(watermark) : std::string()},
      session};
}

// A sink fence whose answers the test chooses: per split, the sink's progress and the epoch its
// fence stands at; open() raises it like a real sink unless a higher epoch is stored.
class ScriptedSinkFence final : public SinkFence {
 public:
  void set(const std::string& id, std::uint64_t epoch, SplitProgress progress) {
    std::lock_guard lk(mu_);
    rows_[id] = Row{epoch, std::move(progress)};
  }
  void unreachable_for(int opens) {
    std::lock_guard lk(mu_);
    unreachable_ = opens;
  }
  std::uint64_t epoch_of(const std::string& id) const {
    std::lock_guard lk(mu_);
    auto it = rows_.find(id);
    return it == rows_.end() ? 0 : it->second.epoch;
  }
  std::vector<std::string> opens() const {
    std::lock_guard lk(mu_);
    return opens_;
  }
  FenceResult open(std::string_view split_id, std::uint64_t epoch) override {
    std::lock_guard lk(mu_);
    const std::string id(split_id);
    opens_.push_back(id + "@" + std::to_string(epoch));
    if (unreachable_ > 0) {
      --unreachable_;
      return FenceResult{FenceStatus::retryable, {}, 0, "connection refused"};
    }
    Row& r = rows_[id];
    if (r.epoch > epoch) return FenceResult{FenceStatus::refused, {}, r.epoch, "scripted"};
    r.epoch = epoch;
    return FenceResult{FenceStatus::open, r.progress, 0, {}};
  }

 private:
  struct Row {
    std::uint64_t epoch = 0;
    SplitProgress progress;
  };
  mutable std::mutex mu_;
  std::map<std::string, Row> rows_;
  std::vector<std::string> opens_;
  int unreachable_ = 0;
};

}  // namespace etlc::testing
