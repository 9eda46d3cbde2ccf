#include "table.hpp"

#include <algorithm>

namespace etlc::cli {

namespace {
// Display width: count UTF-8 lead bytes, not bytes, so ids with accents line up.
std::size_t width(const std::string& s) {
  return static_cast<std::size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}
}  // namespace

Table::Table(std::vector<std::string> header, std::vector<bool> right_aligned)
    : header_(std::move(header)), right_(std::move(right_aligned)) {
  right_.resize(header_.size(), false);
}

void Table::add(std::vector<std::string> row) {
  row.resize(header_.size());
  rows_.push_back(std::move(row));
}

std::string Table::render() const {
  std::vector<std::size_t> w(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& r) {
    for (std::size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], width(r[i]));
  };
  measure(header_);
  for (const auto& r : rows_) measure(r);
  std::string out;
  auto emit = [&](const std::vector<std::string>& r) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      const std::string pad(w[i] - width(r[i]), ' ');
      const bool last = i + 1 == r.size();
      if (right_[i]) {
        line += pad + r[i];
      } else {
        line += r[i];
        if (!last) line += pad;
      }
      if (!last) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  };
  emit(header_);
  for (const auto& r : rows_) emit(r);
  return out;
}

}  // namespace etlc::cli
