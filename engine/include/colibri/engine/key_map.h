// KeyMap: a hash map from 64-bit keys (e.g. ExpertKey) to small values, for
// the engine's hot paths: open addressing with linear probing in one flat
// array (no allocation per entry; it grows by doubling at half full, so once
// warm no operation allocates), erase by backward shift (no tombstones).
// It has no iteration on purpose: decisions never depend on hash order.
// An empty slot holds the key UINT64_MAX; that key itself lives beside the table.
//
// Ownership: a plain value. Thread-safety: none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace colibri::engine {

template <typename V>
class KeyMap {
 public:
  // The value of `key`, or null. The pointer is valid until the next insert or erase.
  V* Find(uint64_t key) {
    if (key == kEmpty) return has_max_ ? &max_value_ : nullptr;
    if (slots_.empty()) return nullptr;
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }
  const V* Find(uint64_t key) const { return const_cast<KeyMap*>(this)->Find(key); }
  bool Contains(uint64_t key) const { return Find(key) != nullptr; }

  // The value of `key`, inserting `V{}` first when it is absent. Valid until the next insert or erase.
  V& operator[](uint64_t key) {
    if (key == kEmpty) {
      if (!has_max_) {
        has_max_ = true;
        max_value_ = V{};
        ++size_;
      }
      return max_value_;
    }
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    size_t i = Home(key);
    for (;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key) return s.value;
      if (s.key == kEmpty) break;
    }
    slots_[i] = Slot{key, V{}};
    ++size_;
    return slots_[i].value;
  }

  // Removes `key`; false when it was absent.
  bool Erase(uint64_t key) {
    if (key == kEmpty) {
      if (!has_max_) return false;
      has_max_ = false;
      --size_;
      return true;
    }
    if (slots_.empty()) return false;
    size_t i = Home(key);
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) break;
      if (slots_[i].key == kEmpty) return false;
    }
    // Backward shift: pull later entries of the probe run into the hole when their home allows it.
    for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      Slot& s = slots_[j];
      if (s.key == kEmpty) break;
      const size_t home = Home(s.key);
      const bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
      if (movable) {
        slots_[i] = std::move(s);
        i = j;
      }
    }
    slots_[i] = Slot{};
    --size_;
    return true;
  }

  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;
  struct Slot {
    uint64_t key = kEmpty;
    V value{};
  };

  // Fibonacci hashing (Knuth): the top bits of key x 2^64/phi. Not splitmix64, whose gamma is the same constant.
  size_t Home(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }

  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    const size_t capacity = old.empty() ? 64 : old.size() * 2;
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    shift_ = 64;
    for (size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = has_max_ ? 1 : 0;
    for (Slot& s : old) {
      if (s.key == kEmpty) continue;
      size_t i = Home(s.key);
      while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
      slots_[i] = std::move(s);
      ++size_;
    }
  }

  std::vector<Slot> slots_;
  bool has_max_ = false;  // the key UINT64_MAX, kept outside the table
  V max_value_{};
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace colibri::engine
