#pragma once
// torch.export's serialized enums (torch/_export/serde/schema.py), which
// number dtypes, layouts and memory formats differently from c10.
#include <c10/core/Device.h>
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include <cstdint>

namespace hfta::exported {

// UserError for a number the schema does not define.
c10::ScalarType scalarTypeOf(int64_t exported);
c10::Layout layoutOf(int64_t exported);
c10::MemoryFormat memoryFormatOf(int64_t exported);
// A float: a JSON number, or "Infinity", "-Infinity", "NaN" (JSON has no
// numbers for them).
double floatOf(const nlohmann::json& exported);
// {"type": "cuda", "index": 0}
c10::Device deviceOf(const nlohmann::json& exported);

}  // namespace hfta::exported
