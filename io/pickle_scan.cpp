#include "io/pickle_scan.h"

#include <fmt/format.h>
#include <torch/csrc/jit/serialization/pickler_helper.h>

#include <cstdint>
#include <cstring>

namespace hfta {
namespace {

// Reads the opcodes as torch/csrc/jit/serialization/unpickler.cpp
// (Unpickler::readInstruction) does, which reads only these; at any other
// opcode it stops with an error, so the walk stops there too.
class Walk {
 public:
  Walk(const char* data, size_t size) : data_(data), size_(size) {}

  std::optional<std::string> run() {
    if (!take(2)) return std::nullopt;  // PROTO and its version
    while (pos_ < size_) {
      using Op = torch::jit::PickleOpCode;
      const auto opcode = static_cast<Op>(data_[pos_++]);
      switch (opcode) {
        case Op::BINPUT:
        case Op::BINGET:
        case Op::BININT1:
          if (!take(1)) return std::nullopt;
          break;
        case Op::BININT2:
          if (!take(2)) return std::nullopt;
          break;
        case Op::BININT:
        case Op::LONG_BINGET:
          if (!take(4)) return std::nullopt;
          break;
        case Op::BINFLOAT:
          if (!take(8)) return std::nullopt;
          break;
        case Op::LONG1:  // a length byte, then that many
          if (!take(1) || !take(static_cast<uint8_t>(data_[pos_ - 1]))) return std::nullopt;
          break;
        case Op::LONG_BINPUT: {  // the memo table grows to the index
          uint64_t id = 0;
          if (!readLittleEndian(4, id)) return std::nullopt;
          // Writers number memo entries in order, each PUT taking 2+ bytes.
          if (id >= size_) return fmt::format("a memo index ({}) beyond any pickle of {} bytes", id, size_);
          break;
        }
        case Op::BINUNICODE:
        case Op::BINUNICODE8: {  // the string is allocated before it is read
          uint64_t length = 0;
          if (!readLittleEndian(opcode == Op::BINUNICODE ? 4 : 8, length)) return std::nullopt;
          if (length > size_ - pos_) {
            return fmt::format("a string of {} bytes where {} remain", length, size_ - pos_);
          }
          pos_ += length;
          break;
        }
        case Op::GLOBAL:  // module and class names, each ended by a newline
          for (int line = 0; line < 2; ++line) {
            const void* end = std::memchr(data_ + pos_, '\n', size_ - pos_);
            if (end == nullptr) return std::nullopt;
            pos_ = static_cast<size_t>(static_cast<const char*>(end) - data_) + 1;
          }
          break;
        case Op::STOP:
          return std::nullopt;
        case Op::EMPTY_LIST:
        case Op::EMPTY_TUPLE:
        case Op::MARK:
        case Op::NEWTRUE:
        case Op::NEWFALSE:
        case Op::NONE:
        case Op::TUPLE:
        case Op::TUPLE1:
        case Op::TUPLE2:
        case Op::TUPLE3:
        case Op::EMPTY_DICT:
        case Op::APPENDS:
        case Op::APPEND:
        case Op::LIST:
        case Op::DICT:
        case Op::SETITEMS:
        case Op::NEWOBJ:
        case Op::BUILD:
        case Op::REDUCE:
        case Op::BINPERSID:
        case Op::SETITEM:
          break;
        default:  // LibTorch stops here with "Unknown opcode"
          return std::nullopt;
      }
    }
    return std::nullopt;
  }

 private:
  bool take(size_t n) {
    if (n > size_ - pos_) return false;  // LibTorch stops at the end too
    pos_ += n;
    return true;
  }

  bool readLittleEndian(size_t n, uint64_t& value) {
    if (!take(n)) return false;
    value = 0;
    for (size_t i = 0; i < n; ++i) value |= uint64_t{static_cast<uint8_t>(data_[pos_ - n + i])} << (8 * i);
    return true;
  }

  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace

std::optional<std::string> pickleHazard(const char* data, size_t size) { return Walk(data, size).run(); }

}  // namespace hfta
