#include "generate.hpp"

#include <algorithm>
#include <vector>

#include "pg.hpp"
#include "schema.hpp"

namespace pgb {

namespace {

constexpr std::uint64_t kMaxRows = 50'000'000;
constexpr std::int64_t kIdSpace = std::int64_t{1} << 40;  // sparse ids are spread over 1..2^40
constexpr std::size_t kCopyChunkRows = 50'000;

// splitmix64: a small generator whose sequence is the same on every platform.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::int64_t below(std::int64_t n) {
    return static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n));
  }
};

std::vector<std::int64_t> make_ids(const GenerateOptions& o, std::uint64_t& dense) {
  Rng rng{o.seed * 0x2545f4914f6cdd1dull + 17};
  std::vector<std::int64_t> ids;
  ids.reserve(o.rows + o.rows / 8);
  const std::uint64_t clusters = std::max<std::uint32_t>(o.clusters, 1);
  const std::uint64_t dense_total = o.rows * 7 / 10;
  // Cluster sizes: uneven shares of the dense rows (some hot ranges are much hotter).
  std::vector<std::uint64_t> share(clusters);
  std::uint64_t sum = 0;
  for (auto& s : share) sum += (s = 1 + rng.next() % 8);
  for (std::uint64_t c = 0; c < clusters; ++c) {
    const std::uint64_t n = dense_total * share[c] / sum;
    // Consecutive ids, or nearly (gaps of 0..2 in a third of the clusters).
    const bool gappy = rng.next() % 3 == 0;
    std::int64_t id = 1 + rng.below(kIdSpace - static_cast<std::int64_t>(4 * n) - 2);
    for (std::uint64_t i = 0; i < n; ++i) {
      ids.push_back(id);
      id += 1 + (gappy ? rng.below(3) : 0);
    }
  }
  auto settle = [&] {
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  };
  settle();
  dense = ids.size();
  while (ids.size() < o.rows) {  // the scattered rest (and top-ups after collisions)
    const std::uint64_t missing = o.rows - ids.size();
    for (std::uint64_t i = 0; i < missing; ++i) ids.push_back(1 + rng.below(kIdSpace - 1));
    settle();
  }
  return ids;
}

}  // namespace

std::string payload_for(std::uint64_t seed, std::int64_t id) {
  Rng rng{seed ^ (static_cast<std::uint64_t>(id) * 0x9e3779b97f4a7c15ull)};
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  const std::size_t len = 20 + rng.next() % 61;
  std::string out = "row-" + std::to_string(id) + "-";
  for (std::size_t i = 0; i < len; ++i) out += kAlphabet[rng.next() % 36];
  return out;
}

GenerateReport generate(const GenerateOptions& o) {
  check_table_name(o.table, "--table");
  if (o.rows == 0 || o.rows > kMaxRows) {
    throw UserError("--rows must be 1.." + std::to_string(kMaxRows));
  }
  if (o.clusters == 0 || o.clusters > 1000) throw UserError("--clusters must be 1..1000");
  GenerateReport rep;
  const std::vector<std::int64_t> ids = make_ids(o, rep.dense_rows);
  Connection c(o.pg, "pg-backfill generate");
  const std::string t = quote_ident(o.table);
  c.exec("BEGIN");
  c.exec("DROP TABLE IF EXISTS " + t);
  c.exec("CREATE TABLE " + t + " (id bigint PRIMARY KEY, payload text NOT NULL)");
  std::string data;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    data += std::to_string(ids[i]);
    data += '\t';
    copy_escape(payload_for(o.seed, ids[i]), data);
    data += '\n';
    if ((i + 1) % kCopyChunkRows == 0 || i + 1 == ids.size()) {
      c.copy_in("COPY " + t + " (id, payload) FROM STDIN", data);
      data.clear();
    }
  }
  // A finer histogram than the default 100 buckets, for the statistics-based planner.
  c.exec("ALTER TABLE " + t + " ALTER COLUMN id SET STATISTICS 1000");
  c.exec("COMMIT");
  c.exec("ANALYZE " + t);
  rep.rows = ids.size();
  rep.min_id = ids.front();
  rep.max_id = ids.back();
  return rep;
}

}  // namespace pgb
