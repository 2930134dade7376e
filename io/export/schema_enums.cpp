#include "io/export/schema_enums.h"

#include <fmt/format.h>

#include <limits>

#include "support/user_error.h"

namespace hfta::exported {
namespace {

UserError unknown(const char* what, int64_t number) {
  return UserError(
      fmt::format("torch.export {} number {} is not one hfta knows; export the model "
                  "again with torch 2.11",
                  what, number));
}

}  // namespace

c10::ScalarType scalarTypeOf(int64_t exported) {
  switch (exported) {
    case 1:
      return at::kByte;
    case 2:
      return at::kChar;
    case 3:
      return at::kShort;
    case 4:
      return at::kInt;
    case 5:
      return at::kLong;
    case 6:
      return at::kHalf;
    case 7:
      return at::kFloat;
    case 8:
      return at::kDouble;
    case 9:
      return at::kComplexHalf;
    case 10:
      return at::kComplexFloat;
    case 11:
      return at::kComplexDouble;
    case 12:
      return at::kBool;
    case 13:
      return at::kBFloat16;
    case 28:
      return at::kUInt16;
    case 29:
      return at::kFloat8_e4m3fn;
    case 30:
      return at::kFloat8_e5m2;
    case 31:
      return at::kFloat8_e4m3fnuz;
    case 32:
      return at::kFloat8_e5m2fnuz;
    default:
      throw unknown("dtype", exported);
  }
}

c10::Layout layoutOf(int64_t exported) {
  switch (exported) {
    case 1:
      return c10::kSparse;
    case 2:
      return c10::kSparseCsr;
    case 3:
      return c10::kSparseCsc;
    case 4:
      return c10::kSparseBsr;
    case 5:
      return c10::kSparseBsc;
    case 6:
      return c10::kMkldnn;
    case 7:
      return c10::kStrided;
    default:
      throw unknown("layout", exported);
  }
}

c10::MemoryFormat memoryFormatOf(int64_t exported) {
  switch (exported) {
    case 1:
      return c10::MemoryFormat::Contiguous;
    case 2:
      return c10::MemoryFormat::ChannelsLast;
    case 3:
      return c10::MemoryFormat::ChannelsLast3d;
    case 4:
      return c10::MemoryFormat::Preserve;
    default:
      throw unknown("memory format", exported);
  }
}

c10::Device deviceOf(const nlohmann::json& exported) {
  const auto& index = exported.at("index");
  return c10::Device(c10::Device(exported.at("type").get<std::string>()).type(),
                     index.is_null() ? -1 : index.get<c10::DeviceIndex>());
}

// A float as torch.export writes it: a JSON number, or "Infinity",
// "-Infinity" or "NaN" (which JSON has no numbers for).
double floatOf(const nlohmann::json& value) {
  if (!value.is_string()) return value.get<double>();
  const auto text = value.get<std::string>();
  if (text == "Infinity") return std::numeric_limits<double>::infinity();
  if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
  if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  throw UserError(fmt::format("torch.export float `{}` is not a number hfta reads", text));
}

}  // namespace hfta::exported
