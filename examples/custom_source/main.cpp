// A complete coordinated source: a planner and a lane over an in-memory range of integers.
// Three members in one process (on a MemoryStore) sum the squares of [0, 200000) together; each
// split carries its partial sum as opaque progress state, so a takeover resumes exactly.
#include <etlc/driver.hpp>
#include <etlc/memory_store.hpp>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

constexpr std::uint64_t kTotal = 200'000, kSplit = 10'000, kPerStep = 500;
std::atomic<std::uint64_t> g_sum{0};  // the "sink": completed splits add their sums once

// Runs on the leader only: splits [0, kTotal) into ranges. The descriptor is "begin end".
class RangePlanner final : public etlc::Planner {
 public:
  std::string fingerprint() const override { return "squares/200000/10000"; }
  etlc::Plan plan(const etlc::PlanContext&) override {
    etlc::Plan plan;  // final: the job completes once every split has
    for (std::uint64_t b = 0; b < kTotal; b += kSplit) {
      std::string id = "range-" + std::to_string(b / kSplit);
      std::string descriptor = std::to_string(b) + " " + std::to_string(b + kSplit);
      plan.splits.push_back({{id, descriptor, kSplit}, std::nullopt});
    }
    return plan;
  }
};

// Progress: watermark = numbers done, state = their partial sum and the range's end (which a cut
// moves), done = the numbers done again (the weight is the split's count of numbers), so the
// leader balances on what remains and knows which splits end last.
class SquaresLane final : public etlc::Lane {
 public:
  explicit SquaresLane(const etlc::LaneContext& ctx) {
    std::sscanf(ctx.spec.descriptor.c_str(), "%lu %lu", &begin_, &end_);
    next_ = begin_ + ctx.resume.watermark;
    // "sum end": the end is there once the lane was cut (split() below); "sum" alone otherwise.
    if (!ctx.resume.state.empty()) std::sscanf(ctx.resume.state.c_str(), "%lu %lu", &sum_, &end_);
  }
  etlc::StepResult step() override {
    for (std::uint64_t i = 0; i < kPerStep && next_ < end_; ++i, ++next_) sum_ += next_ * next_;
    return next_ < end_ ? etlc::StepResult::more() : etlc::StepResult::end();
  }
  etlc::SplitProgress durable_progress() override {
    return {next_ - begin_, std::to_string(sum_) + " " + std::to_string(end_), next_ - begin_};
  }
  // Idle lanes elsewhere: give them the numbers not read yet, from the first one past `keep` of
  // them. The residual is a range like any planned one; this lane now ends at the cut.
  std::optional<etlc::SplitResidual> split(double keep) override {
    const std::uint64_t left = end_ - next_;
    if (left < 2 * kPerStep) return std::nullopt;  // too little to be worth a split
    const std::uint64_t cut = next_ + static_cast<std::uint64_t>(static_cast<double>(left) * keep);
    etlc::SplitResidual residual{std::to_string(cut) + " " + std::to_string(end_), end_ - cut};
    end_ = cut;
    return residual;
  }
  void close(etlc::LaneEnd end) override {
    if (end == etlc::LaneEnd::completed) g_sum += sum_;  // the completion is durable: publish
  }

 private:
  std::uint64_t begin_ = 0, end_ = 0, next_ = 0, sum_ = 0;
};

class SquaresSource final : public etlc::SplitSource {
 public:
  std::unique_ptr<etlc::Lane> open(const etlc::LaneContext& ctx) override {
    return std::make_unique<SquaresLane>(ctx);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {  // no options: --help says so
    std::printf(
        "usage: %s\n  three members in one process (memory store) sum the squares of "
        "[0, 200000) together;\n  exit 0 when the sum is right. See docs/custom-sources.md.\n",
        argv[0]);
    return std::string_view(argv[1]) == "--help" ? 0 : 2;
  }
  auto store = std::make_shared<etlc::MemoryStore>();  // production: etlc::NatsStore
  auto planner = std::make_shared<RangePlanner>();
  auto source = std::make_shared<SquaresSource>();
  std::vector<std::unique_ptr<etlc::Driver>> members;
  for (int i = 0; i < 3; ++i) {
    etlc::CoordinatorConfig config;
    config.instance_id = "member-" + std::to_string(i);
    members.push_back(std::make_unique<etlc::Driver>(config, store, planner, source));
  }
  std::vector<etlc::DriverResult> results(members.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < members.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = members[i]->run(); });
  }
  for (auto& t : threads) t.join();

  std::uint64_t want = 0;
  for (std::uint64_t i = 0; i < kTotal; ++i) want += i * i;
  std::printf("sum of squares: %llu, expected %llu\n", static_cast<unsigned long long>(g_sum),
              static_cast<unsigned long long>(want));
  for (const etlc::DriverResult& r : results) {
    if (!r.ok()) return r.exit_code();  // etlc/exit_codes.hpp: 1 fatal, 2 config, 3 stalled
  }
  return g_sum == want ? etlc::exit_codes::ok : etlc::exit_codes::fatal;
}
