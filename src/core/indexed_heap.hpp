// Internal: a binary heap of small integer handles (member indices) whose keys live outside the
// heap, with O(log n) push, erase and re-key by handle. Used by desired_assignment to find the
// least-loaded member with a free lane and the member with the most movable load without
// rescanning the fleet.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace etlc::core::detail {

// `Before(a, b)` is true iff handle a belongs nearer the top than handle b; it must be a strict
// weak order that is total on distinct handles (break ties by a unique rank). After changing the
// key of a handle in the heap, call update(handle) before changing any other key. Not
// thread-safe.
template <class Before>
class IndexedHeap {
 public:
  IndexedHeap(std::size_t handles, Before before) : pos_(handles, kAbsent), before_(before) {}

  bool empty() const noexcept { return heap_.empty(); }
  std::size_t size() const noexcept { return heap_.size(); }
  std::uint32_t top() const noexcept {
    assert(!heap_.empty());
    return heap_.front();
  }
  bool contains(std::uint32_t h) const noexcept { return pos_[h] != kAbsent; }

  void push(std::uint32_t h) {
    assert(!contains(h));
    heap_.push_back(h);
    pos_[h] = static_cast<std::uint32_t>(heap_.size() - 1);
    sift_up(heap_.size() - 1);
  }

  void erase(std::uint32_t h) {
    assert(contains(h));
    const std::size_t i = pos_[h];
    const std::uint32_t last = heap_.back();
    heap_.pop_back();
    pos_[h] = kAbsent;
    if (i < heap_.size()) {
      place(i, last);
      restore(i);
    }
  }

  // Re-establishes the heap order after h's key changed.
  void update(std::uint32_t h) {
    assert(contains(h));
    restore(pos_[h]);
  }

  // Makes membership match `present`, re-keying h if it stays.
  void set(std::uint32_t h, bool present) {
    if (present) {
      if (contains(h)) {
        update(h);
      } else {
        push(h);
      }
    } else if (contains(h)) {
      erase(h);
    }
  }

 private:
  static constexpr std::uint32_t kAbsent = ~std::uint32_t{0};

  void place(std::size_t i, std::uint32_t h) {
    heap_[i] = h;
    pos_[h] = static_cast<std::uint32_t>(i);
  }

  void restore(std::size_t i) {
    if (i > 0 && before_(heap_[i], heap_[(i - 1) / 2])) {
      sift_up(i);
    } else {
      sift_down(i);
    }
  }

  void sift_up(std::size_t i) {
    const std::uint32_t h = heap_[i];
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (!before_(h, heap_[parent])) break;
      place(i, heap_[parent]);
      i = parent;
    }
    place(i, h);
  }

  void sift_down(std::size_t i) {
    const std::uint32_t h = heap_[i];
    const std::size_t n = heap_.size();
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && before_(heap_[child + 1], heap_[child])) ++child;
      if (!before_(heap_[child], h)) break;
      place(i, heap_[child]);
      i = child;
    }
    place(i, h);
  }

  std::vector<std::uint32_t> heap_;
  std::vector<std::uint32_t> pos_;
  Before before_;
};

}  // namespace etlc::core::detail
