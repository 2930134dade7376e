#include "io/export/pt2_reader.h"

#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>

#include "io/export/schema_enums.h"
#include "support/error_summary.h"
#include "support/user_error.h"

namespace hfta::exported {
namespace {

using caffe2::serialize::PyTorchStreamReader;
using nlohmann::json;

std::string recordText(PyTorchStreamReader& reader, const std::string& name) {
  auto [data, size] = reader.getRecord(name);
  return std::string(static_cast<const char*>(data.get()), size);
}

// A tensor stored raw (use_pickle false): its storage's bytes, with the
// sizes, strides and offset of tensor_meta.
at::Tensor rawTensor(PyTorchStreamReader& reader, const std::string& record, const json& meta) {
  auto ints = [&](const json& list) {
    std::vector<int64_t> out;
    for (const auto& s : list) out.push_back(s.at("as_int").get<int64_t>());
    return out;
  };
  const auto dtype = scalarTypeOf(meta.at("dtype").get<int64_t>());
  auto [data, size] = reader.getRecord(record);
  const auto element = static_cast<int64_t>(c10::elementSize(dtype));
  auto storage = at::empty({static_cast<int64_t>(size) / element}, at::TensorOptions().dtype(dtype));
  std::memcpy(storage.data_ptr(), data.get(), static_cast<size_t>(storage.numel() * element));
  auto tensor = storage.as_strided(ints(meta.at("sizes")), ints(meta.at("strides")),
                                   meta.at("storage_offset").at("as_int").get<int64_t>());
  return tensor.requires_grad_(meta.value("requires_grad", false));
}

// data/weights/<name>_weights_config.json or data/constants/<...>: each
// entry's file under `folder`, read as a tensor.
std::map<std::string, at::Tensor> tensorsOf(PyTorchStreamReader& reader, const std::string& folder,
                                            const std::string& config_record, const std::string& label) {
  std::map<std::string, at::Tensor> out;
  if (!reader.hasRecord(config_record)) return out;
  const auto config = json::parse(recordText(reader, config_record)).at("config");
  std::map<std::string, at::Tensor> by_record;  // a tied weight: two names, one record, one tensor
  for (const auto& [name, entry] : config.items()) {
    const auto record = folder + entry.at("path_name").get<std::string>();
    if (const auto tied = by_record.find(record); tied != by_record.end()) {
      out[name] = tied->second;
      continue;
    }
    if (entry.value("use_pickle", false)) {
      throw UserError(
          fmt::format("{}: tensor `{}` is stored pickled ({}); hfta reads the raw tensors "
                      "torch.export.save writes. Save the program again with torch.export.save",
                      label, name, record));
    }
    out[name] = by_record[record] = rawTensor(reader, record, entry.at("tensor_meta"));
  }
  return out;
}

void checkSchemaVersion(const json& exported, const std::string& program, const std::string& label) {
  const auto& version = exported.at("schema_version");
  const int major = version.at("major").get<int>();
  const int minor = version.at("minor").get<int>();
  if (major != kSchemaMajor) {
    throw UserError(fmt::format(
        "{}: program `{}` was written with torch.export schema version {}.{} (torch {}); hfta reads version "
        "{}.x (it was built against {}.{}, torch 2.11). Export the model again with torch 2.11",
        label, program, major, minor, exported.value("torch_version", "unknown"), kSchemaMajor, kSchemaMajor,
        kSchemaMinor));
  }
}

std::vector<Program> programsOf(PyTorchStreamReader& reader, const std::string& label) {
  std::vector<Program> programs;
  for (const auto& record : reader.getAllRecords()) {
    const std::string prefix = "models/", suffix = ".json";
    if (record.rfind(prefix, 0) != 0 || record.size() <= prefix.size() + suffix.size() ||
        record.compare(record.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    Program program;
    program.name = record.substr(prefix.size(), record.size() - prefix.size() - suffix.size());
    program.exported = json::parse(recordText(reader, record));
    checkSchemaVersion(program.exported, program.name, label);
    program.weights =
        tensorsOf(reader, "data/weights/", "data/weights/" + program.name + "_weights_config.json", label);
    program.constants =
        tensorsOf(reader, "data/constants/", "data/constants/" + program.name + "_constants_config.json", label);
    programs.push_back(std::move(program));
  }
  if (programs.empty()) {
    throw UserError(
        fmt::format("{} holds no torch.export program (no models/*.json): save one with "
                    "torch.export.save(torch.export.export(model, args), path)",
                    label));
  }
  return programs;
}

template <typename Source>
std::vector<Program> read(Source&& source, const std::string& label) {
  try {
    PyTorchStreamReader reader(std::forward<Source>(source));
    return programsOf(reader, label);
  } catch (const c10::Error& e) {
    throw UserError(fmt::format("{} is a damaged torch.export archive: {}. Save it again with torch.export.save", label,
                                errorSummary(e)));
  } catch (const json::exception& e) {
    throw UserError(
        fmt::format("{} is a damaged torch.export archive: its program does not read ({}). Save it "
                    "again with torch.export.save",
                    label, e.what()));
  }
}

}  // namespace

void forEachNode(const json& graph, const std::function<void(const json& node)>& visit) {
  for (const auto& node : graph.at("nodes")) {
    visit(node);
    for (const auto& in : node.at("inputs")) {
      if (in.at("arg").contains("as_graph")) forEachNode(in.at("arg").at("as_graph").at("graph"), visit);
    }
  }
}

std::vector<Program> readPrograms(const std::string& path, const std::string& label) { return read(path, label); }
std::vector<Program> readPrograms(std::istream& in, const std::string& label) { return read(&in, label); }

}  // namespace hfta::exported
