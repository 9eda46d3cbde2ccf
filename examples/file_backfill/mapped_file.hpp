// A read-only memory mapping of a whole file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>

namespace fb {

class MappedFile {
 public:
  // Throws std::runtime_error naming the file if it cannot be opened or mapped.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view data() const { return {static_cast<const char*>(addr_), size_}; }
  std::uint64_t size() const { return size_; }

 private:
  void* addr_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace fb
