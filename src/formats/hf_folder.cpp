// Hugging Face model folders: opens config.json plus one safetensors file or the shards of an index (checking
// the index against the shards), and writes folders in the same layout; also ParseJson for config files.
#include "formats/hf_folder.h"

#include <filesystem>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "formats/safetensors.h"
#include "util/mapped_file.h"

namespace parallm {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

constexpr const char* kConfigFile = "config.json";
constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

std::string Join(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

// 1-based line and column of byte `pos` in `text`, for error messages people can jump to.
std::pair<size_t, size_t> LineColumn(std::string_view text, size_t pos) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

// A shard name from an index must be a plain file name inside the folder: no separators and no "..".
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name.find('/') == std::string::npos && name.find('\\') == std::string::npos &&
         name.find("..") == std::string::npos && name.find('\0') == std::string::npos;
}

// Adds `shard`'s tensors to `out`; `origin` remembers which shard each tensor came from, to name both
// files when one tensor appears twice.
Status MergeShard(SafetensorsFile shard, const std::string& shard_name, TensorSet& out,
                  std::map<std::string, std::string>& origin) {
  for (auto& [name, view] : shard.tensors.tensors) {
    auto [it, inserted] = origin.emplace(name, shard_name);
    if (!inserted) return Err("tensor '{}' is in both {} and {}", name, it->second, shard_name);
    out.tensors.emplace(name, std::move(view));
  }
  for (auto& owner : shard.tensors.owners) out.owners.push_back(std::move(owner));
  return Status::Ok();
}

Status OpenShards(const std::string& dir, HfFolder& folder) {
  const std::string index_path = Join(dir, kIndexFile);
  PARALLM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(index_path));
  PARALLM_ASSIGN_OR_RETURN(json::value index, ParseJson(text, index_path));
  const json::object* root = index.if_object();
  if (root == nullptr) return Err("{}: expected a JSON object", index_path);
  const json::value* map_value = root->if_contains("weight_map");
  if (map_value == nullptr || !map_value->is_object())
    return Err("{}: missing \"weight_map\" object (tensor name -> shard file)", index_path);

  // The shards, each opened once, in name order; and where the index says each tensor is.
  std::map<std::string, std::vector<std::string>> tensors_by_shard;
  for (const auto& kv : map_value->get_object()) {
    if (!kv.value().is_string())
      return Err("{}: weight_map entry for '{}' is not a file name", index_path, std::string(kv.key()));
    std::string shard(kv.value().get_string());
    if (!IsPlainFileName(shard))
      return Err("{}: shard '{}' (for tensor '{}') is not a plain file name in the folder", index_path, shard,
                 std::string(kv.key()));
    tensors_by_shard[shard].emplace_back(kv.key());
  }
  if (tensors_by_shard.empty()) return Err("{}: weight_map is empty", index_path);

  std::map<std::string, std::string> origin;
  for (const auto& [shard, names] : tensors_by_shard) {
    const std::string shard_path = Join(dir, shard);
    if (!fs::exists(shard_path)) return Err("{}: shard {} is listed but missing", index_path, shard);
    PARALLM_ASSIGN_OR_RETURN(SafetensorsFile file, ReadSafetensors(shard_path));
    for (const std::string& name : names)
      if (file.tensors.Find(name) == nullptr)
        return Err("{}: tensor '{}' is listed in {} but that shard does not hold it", index_path, name, shard);
    PARALLM_RETURN_IF_ERROR(MergeShard(std::move(file), shard, folder.tensors, origin).WithContext(dir));
  }
  return Status::Ok();
}

// Greedy split of `tensors` (in name order) into shards of at most `max_bytes`; a tensor larger than that
// gets a shard of its own, as transformers' save_pretrained does.
std::vector<std::vector<const std::pair<const std::string, TensorView>*>> PlanShards(const TensorSet& tensors,
                                                                                     size_t max_bytes) {
  std::vector<std::vector<const std::pair<const std::string, TensorView>*>> shards(1);
  size_t bytes = 0;
  for (const auto& entry : tensors.tensors) {
    size_t n = entry.second.nbytes;
    if (max_bytes != 0 && !shards.back().empty() && bytes + n > max_bytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(&entry);
    bytes += n;
  }
  return shards;
}

Status WriteShard(const std::string& path, const std::vector<const std::pair<const std::string, TensorView>*>& shard) {
  SafetensorsWriter writer;
  writer.SetMetadata("format", "pt");  // transformers refuses safetensors whose metadata format is not pt/tf/flax/mlx
  for (const auto* entry : shard) {
    const TensorView& v = entry->second;
    PARALLM_RETURN_IF_ERROR(writer.AddTensor(entry->first, v.dtype, v.shape, v.data, v.nbytes));
  }
  return writer.Write(path);
}

Status WriteJson(const std::string& path, const json::value& value) {
  std::string text = json::serialize(value);
  text.push_back('\n');
  return WriteFile(path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

}  // namespace

Result<json::value> ParseJson(const std::string& text, const std::string& what) {
  json::parser parser;  // strict RFC 8259 JSON; strings must be valid UTF-8
  json::error_code ec;
  size_t used = parser.write(text.data(), text.size(), ec);
  if (ec) {
    auto [line, column] = LineColumn(text, used);
    return Err("{}: invalid JSON at byte {} (line {}, column {}): {}", what, used, line, column, ec.message());
  }
  return parser.release();
}

Result<HfFolder> OpenHfFolder(const std::string& dir) {
  std::error_code fs_error;
  if (!fs::is_directory(dir, fs_error)) return Err("{}: not a folder", dir);
  const std::string config_path = Join(dir, kConfigFile);
  if (!fs::is_regular_file(config_path, fs_error))
    return Err("{}: no config.json; expected a Hugging Face model folder", dir);

  HfFolder folder;
  folder.path = dir;
  PARALLM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(config_path));
  PARALLM_ASSIGN_OR_RETURN(json::value config, ParseJson(text, config_path));
  if (!config.is_object()) return Err("{}: expected a JSON object", config_path);
  folder.config = std::move(config.get_object());
  Result<std::optional<MlxQuantization>> quantization = ParseMlxQuantization(folder.config);
  if (!quantization.ok()) return quantization.status().WithContext(dir);
  folder.quantization = std::move(quantization).value();

  const std::string single = Join(dir, kSingleFile);
  if (fs::exists(single, fs_error)) {
    PARALLM_ASSIGN_OR_RETURN(SafetensorsFile file, ReadSafetensors(single));
    folder.tensors = std::move(file.tensors);
  } else if (fs::exists(Join(dir, kIndexFile), fs_error)) {
    PARALLM_RETURN_IF_ERROR(OpenShards(dir, folder));
  } else {
    return Err("{}: no {} or {}; expected a Hugging Face model folder with safetensors weights", dir, kSingleFile,
               kIndexFile);
  }
  return folder;
}

Status WriteHfFolder(const std::string& dir, const json::object& config, const TensorSet& tensors,
                     size_t max_shard_bytes) {
  std::error_code fs_error;
  fs::create_directories(dir, fs_error);
  if (fs_error) return Err("{}: cannot create folder: {}", dir, fs_error.message());

  // A folder rewritten in the other layout would keep its old entry point, which OpenHfFolder would then
  // prefer (model.safetensors) or misread (a stale index), so the one this layout does not use is removed.
  auto shards = PlanShards(tensors, max_shard_bytes);
  if (shards.size() == 1) {
    PARALLM_RETURN_IF_ERROR(WriteShard(Join(dir, kSingleFile), shards[0]));
    fs::remove(Join(dir, kIndexFile), fs_error);
  } else {
    fs::remove(Join(dir, kSingleFile), fs_error);
    json::object weight_map;
    uint64_t total_size = 0;
    for (size_t i = 0; i < shards.size(); ++i) {
      std::string name = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
      PARALLM_RETURN_IF_ERROR(WriteShard(Join(dir, name), shards[i]));
      for (const auto* entry : shards[i]) {
        weight_map[entry->first] = name;
        total_size += entry->second.nbytes;
      }
    }
    json::object index{{"metadata", json::object{{"total_size", total_size}}}, {"weight_map", std::move(weight_map)}};
    PARALLM_RETURN_IF_ERROR(WriteJson(Join(dir, kIndexFile), index));
  }
  return WriteJson(Join(dir, kConfigFile), config);
}

}  // namespace parallm
