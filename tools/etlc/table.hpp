// A plain-text table: columns padded to their widest cell, two spaces apart.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace etlc::cli {

class Table {
 public:
  // `right_aligned[i]` right-aligns column i (numbers).
  Table(std::vector<std::string> header, std::vector<bool> right_aligned);
  void add(std::vector<std::string> row);
  std::string render() const;  // one line per row, header first, each ending in '\n'
  std::size_t rows() const { return rows_.size(); }

 private:
  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace etlc::cli
