// Tests for Hugging Face folders (single file and sharded round trips, index checks, path escapes) and for
// the MLX quantization section of config.json, with its per-module overrides.
#include "formats/hf_folder.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "formats/safetensors.h"
#include "test_paths.h"
#include "test_text.h"
#include "util/mapped_file.h"

namespace parallm {
namespace {

using testing::Contains;

namespace json = boost::json;
namespace fs = std::filesystem;

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Adds a tensor whose bytes are `seed`, `seed + 1`, ... and are owned by the set.
void AddTensor(TensorSet& set, const std::string& name, DType dtype, std::vector<int64_t> shape, uint8_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n) * Info(dtype).block_bytes);
  for (size_t i = 0; i < bytes->size(); ++i) (*bytes)[i] = static_cast<uint8_t>(seed + i);
  set.tensors[name] = TensorView{dtype, std::move(shape), bytes->data(), bytes->size()};
  set.owners.push_back(bytes);
}

// A small model: 5 tensors of 64, 32, 128, 16 and 64 bytes.
TensorSet SmallModel() {
  TensorSet set;
  AddTensor(set, "lm_head.weight", DType::kF32, {4, 4}, 1);
  AddTensor(set, "model.embed_tokens.weight", DType::kBF16, {4, 4}, 2);
  AddTensor(set, "model.layers.0.mlp.down_proj.weight", DType::kU32, {4, 8}, 3);
  AddTensor(set, "model.layers.0.mlp.down_proj.scales", DType::kF16, {4, 2}, 4);
  AddTensor(set, "model.norm.weight", DType::kF32, {16}, 5);
  return set;
}

json::object SmallConfig() {
  return json::object{{"model_type", "llama"}, {"hidden_size", 16}, {"architectures", json::array{"LlamaForCausalLM"}}};
}

void ExpectSameTensors(const TensorSet& a, const TensorSet& b) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, va] : a.tensors) {
    const TensorView* vb = b.Find(name);
    ASSERT_NE(vb, nullptr) << name;
    EXPECT_EQ(va.dtype, vb->dtype) << name;
    EXPECT_EQ(va.shape, vb->shape) << name;
    ASSERT_EQ(va.nbytes, vb->nbytes) << name;
    if (va.nbytes > 0) {
      EXPECT_EQ(std::memcmp(va.data, vb->data, va.nbytes), 0) << name;
    }
  }
}

json::object ReadJsonObject(const std::string& path) {
  auto text = ReadTextFile(path);
  EXPECT_TRUE(text.ok());
  auto v = ParseJson(*text, path);
  EXPECT_TRUE(v.ok()) << v.status().message();
  return v->as_object();
}

TEST(HfFolder, SingleFileRoundTrip) {
  std::string dir = testing::ScratchDir("hf-single") + "/new/model";  // WriteHfFolder creates the folders
  TensorSet model = SmallModel();
  ASSERT_TRUE(WriteHfFolder(dir, SmallConfig(), model).ok());
  EXPECT_TRUE(fs::exists(dir + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors.index.json"));

  auto folder = OpenHfFolder(dir);
  ASSERT_TRUE(folder.ok()) << folder.status().message();
  EXPECT_EQ(folder->path, dir);
  EXPECT_EQ(folder->config, SmallConfig());
  EXPECT_FALSE(folder->quantization.has_value());
  ExpectSameTensors(model, folder->tensors);
  auto file = ReadSafetensors(dir + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->metadata.at("format"), "pt");  // transformers refuses files without it
}

TEST(HfFolder, ShardedRoundTrip) {
  std::string dir = testing::ScratchDir("hf-sharded");
  TensorSet model = SmallModel();
  // Name order: lm_head 64, embed_tokens 32, down_proj.scales 16 | down_proj.weight 128 | norm 64: three shards
  // of at most 128 bytes.
  ASSERT_TRUE(WriteHfFolder(dir, SmallConfig(), model, 128).ok());
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors"));
  for (const char* shard :
       {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"})
    EXPECT_TRUE(fs::exists(dir + "/" + shard)) << shard;
  EXPECT_FALSE(fs::exists(dir + "/model-00004-of-00003.safetensors"));

  json::object index = ReadJsonObject(dir + "/model.safetensors.index.json");
  EXPECT_EQ(index.at("metadata").at("total_size").to_number<uint64_t>(), 64u + 32u + 128u + 16u + 64u);
  const json::object& weight_map = index.at("weight_map").as_object();
  EXPECT_EQ(weight_map.size(), 5u);
  EXPECT_EQ(weight_map.at("lm_head.weight"), "model-00001-of-00003.safetensors");
  EXPECT_EQ(weight_map.at("model.embed_tokens.weight"), "model-00001-of-00003.safetensors");
  EXPECT_EQ(weight_map.at("model.layers.0.mlp.down_proj.weight"), "model-00002-of-00003.safetensors");
  EXPECT_EQ(weight_map.at("model.layers.0.mlp.down_proj.scales"), "model-00001-of-00003.safetensors");
  EXPECT_EQ(weight_map.at("model.norm.weight"), "model-00003-of-00003.safetensors");

  auto folder = OpenHfFolder(dir);
  ASSERT_TRUE(folder.ok()) << folder.status().message();
  ExpectSameTensors(model, folder->tensors);
  EXPECT_EQ(folder->tensors.owners.size(), 3u);  // one mmap per shard

  // Rewriting as one file replaces the index, so the folder reads as the new layout.
  ASSERT_TRUE(WriteHfFolder(dir, SmallConfig(), model).ok());
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors.index.json"));
  auto again = OpenHfFolder(dir);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->tensors.owners.size(), 1u);
}

TEST(HfFolder, TensorLargerThanAShardGetsItsOwn) {
  std::string dir = testing::ScratchDir("hf-big-tensor");
  TensorSet model = SmallModel();
  ASSERT_TRUE(WriteHfFolder(dir, SmallConfig(), model, 40).ok());
  json::object index = ReadJsonObject(dir + "/model.safetensors.index.json");
  // 64 | 32 | 16 | 128 | 64 bytes in name order: no two neighbours fit in 40 bytes, so five shards.
  EXPECT_EQ(index.at("weight_map").at("model.norm.weight"), "model-00005-of-00005.safetensors");
  auto folder = OpenHfFolder(dir);
  ASSERT_TRUE(folder.ok()) << folder.status().message();
  ExpectSameTensors(model, folder->tensors);
}

TEST(HfFolder, FolderWithoutConfigIsRejected) {
  std::string dir = testing::ScratchDir("hf-no-config");
  auto r = OpenHfFolder(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), dir + ": no config.json; expected a Hugging Face model folder");

  auto missing = OpenHfFolder(dir + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), dir + "/nope: not a folder");
}

TEST(HfFolder, BadConfigIsRejectedWithItsPath) {
  std::string dir = testing::ScratchDir("hf-bad-config");
  WriteText(dir + "/config.json", "{\n  \"a\": 1,\n  \"b\": ,\n}");
  auto r = OpenHfFolder(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(
      Contains(r.status().message(), dir + "/config.json: invalid JSON at byte 19 (line 3, column 8): syntax error"));

  WriteText(dir + "/config.json", "[1, 2]");
  r = OpenHfFolder(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), dir + "/config.json: expected a JSON object");
}

TEST(HfFolder, FolderWithoutWeightsIsRejected) {
  std::string dir = testing::ScratchDir("hf-no-weights");
  WriteText(dir + "/config.json", "{}");
  auto r = OpenHfFolder(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), dir + ": no model.safetensors or model.safetensors.index.json"));
}

TEST(HfFolder, BrokenSafetensorsIsReportedWithItsPath) {
  std::string dir = testing::ScratchDir("hf-broken-file");
  WriteText(dir + "/config.json", "{}");
  WriteText(dir + "/model.safetensors", "abc");
  auto r = OpenHfFolder(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), dir + "/model.safetensors: file is 3 bytes, too short for the 8-byte header length");
}

// Two shards written by hand: a.safetensors {x, y}, b.safetensors {z}.
std::string ShardedFixture(const std::string& name) {
  std::string dir = testing::ScratchDir(name);
  WriteText(dir + "/config.json", "{\"model_type\": \"llama\"}");
  TensorSet a, b;
  AddTensor(a, "x", DType::kF32, {2}, 10);
  AddTensor(a, "y", DType::kF16, {3}, 20);
  AddTensor(b, "z", DType::kU8, {5}, 30);
  for (auto& [file, set] : {std::pair<std::string, TensorSet*>{"a.safetensors", &a}, {"b.safetensors", &b}}) {
    SafetensorsWriter w;
    for (const auto& [n, v] : set->tensors) EXPECT_TRUE(w.AddTensor(n, v.dtype, v.shape, v.data, v.nbytes).ok());
    EXPECT_TRUE(w.Write(dir + "/" + file).ok());
  }
  return dir;
}

Status OpenWithIndex(const std::string& dir, const std::string& weight_map) {
  WriteText(dir + "/model.safetensors.index.json", "{\"metadata\": {}, \"weight_map\": " + weight_map + "}");
  return OpenHfFolder(dir).status();
}

TEST(HfFolder, IndexOpensEachShardOnce) {
  std::string dir = ShardedFixture("hf-index-ok");
  WriteText(dir + "/model.safetensors.index.json",
            R"({"weight_map": {"x": "a.safetensors", "y": "a.safetensors", "z": "b.safetensors"}})");
  auto r = OpenHfFolder(dir);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->tensors.tensors.size(), 3u);
  EXPECT_EQ(r->tensors.owners.size(), 2u);
  EXPECT_EQ(r->tensors.Find("z")->data[4], 34);
}

TEST(HfFolder, IndexEdgeCases) {
  std::string dir = ShardedFixture("hf-index-edges");
  const std::string index = dir + "/model.safetensors.index.json";
  struct Case {
    std::string what, weight_map, error;
  };
  std::vector<Case> cases = {
      {"missing shard", R"({"x": "a.safetensors", "z": "c.safetensors"})",
       index + ": shard c.safetensors is listed but missing"},
      {"tensor not in its shard", R"({"x": "a.safetensors", "z": "a.safetensors"})",
       index + ": tensor 'z' is listed in a.safetensors but that shard does not hold it"},
      {"parent escape", R"({"x": "../a.safetensors"})",
       index + ": shard '../a.safetensors' (for tensor 'x') is not a plain file name in the folder"},
      {"subfolder", R"({"x": "sub/a.safetensors"})", "'sub/a.safetensors' (for tensor 'x') is not a plain file name"},
      {"absolute path", R"({"x": "/etc/passwd"})", "is not a plain file name"},
      {"dot dot", R"({"x": ".."})", "is not a plain file name"},
      {"empty name", R"({"x": ""})", "is not a plain file name"},
      {"not a string", R"({"x": 3})", index + ": weight_map entry for 'x' is not a file name"},
      {"empty map", R"({})", index + ": weight_map is empty"},
      {"no map", R"([])", index + ": missing \"weight_map\" object"},
  };
  for (const Case& c : cases) {
    Status s = OpenWithIndex(dir, c.weight_map);
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_TRUE(Contains(s.message(), c.error)) << c.what;
  }
}

TEST(HfFolder, TensorInTwoShardsIsRejected) {
  std::string dir = ShardedFixture("hf-index-dup");
  // b.safetensors also holds "x"; the index lists x in a and z in b, so b's x is a second copy.
  SafetensorsWriter w;
  ASSERT_TRUE(w.AddTensor("x", DType::kF32, {2}, std::vector<uint8_t>(8, 1)).ok());
  ASSERT_TRUE(w.AddTensor("z", DType::kU8, {5}, std::vector<uint8_t>(5, 2)).ok());
  ASSERT_TRUE(w.Write(dir + "/b.safetensors").ok());
  Status s = OpenWithIndex(dir, R"({"x": "a.safetensors", "z": "b.safetensors"})");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), dir + ": tensor 'x' is in both a.safetensors and b.safetensors");
}

TEST(HfFolder, BadIndexJsonNamesTheIndex) {
  std::string dir = ShardedFixture("hf-index-json");
  WriteText(dir + "/model.safetensors.index.json", "{\"weight_map\": {\"x\": \"a.safetensors\",}}");
  auto r = OpenHfFolder(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(),
                       dir + "/model.safetensors.index.json: invalid JSON at byte 37 (line 1, column 38)"));
}

TEST(ParseJson, ErrorsNameTheSourceAndPosition) {
  auto ok = ParseJson(R"({"a": [1, 2.5, "x"]})", "ok.json");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->at("a").as_array().size(), 3u);

  auto bad = ParseJson("{\"a\": tru}", "bad.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Contains(bad.status().message(), "bad.json: invalid JSON at byte"));
  auto empty = ParseJson("", "empty.json");
  ASSERT_FALSE(empty.ok());
  EXPECT_TRUE(Contains(empty.status().message(), "empty.json: invalid JSON at byte 0 (line 1, column 1)"));
  auto extra = ParseJson("{} {}", "extra.json");
  ASSERT_FALSE(extra.ok());
  EXPECT_TRUE(Contains(extra.status().message(), "extra.json: invalid JSON at byte 3"));
  auto utf8 = ParseJson("\"\xc3\x28\"", "utf8.json");
  EXPECT_FALSE(utf8.ok());
}

json::object Config(const std::string& text) {
  auto v = ParseJson(text, "config.json");
  EXPECT_TRUE(v.ok()) << v.status().message();
  return v->as_object();
}

// A mixed-precision mlx-lm config: 4-bit defaults, down_proj at 8 bits, lm_head left in float.
TEST(MlxQuantization, DefaultsAndPerModuleOverrides) {
  auto r = ParseMlxQuantization(Config(R"({
    "model_type": "qwen2",
    "quantization": {
      "group_size": 64, "bits": 4, "mode": "affine",
      "model.layers.0.mlp.down_proj": {"group_size": 32, "bits": 8},
      "model.layers.1.self_attn.q_proj": {"bits": 6},
      "lm_head": false,
      "model.embed_tokens": true
    }
  })"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->has_value());
  const MlxQuantization& q = **r;
  EXPECT_EQ(q.defaults.bits, 4);
  EXPECT_EQ(q.defaults.group_size, 64);
  EXPECT_EQ(q.overrides.size(), 4u);

  auto down = q.ForModule("model.layers.0.mlp.down_proj");
  ASSERT_TRUE(down.has_value());
  EXPECT_EQ(down->bits, 8);
  EXPECT_EQ(down->group_size, 32);
  auto q_proj = q.ForModule("model.layers.1.self_attn.q_proj");  // a partial dict: MLX's default group size
  ASSERT_TRUE(q_proj.has_value());
  EXPECT_EQ(q_proj->bits, 6);
  EXPECT_EQ(q_proj->group_size, 64);
  EXPECT_FALSE(q.ForModule("lm_head").has_value());
  auto embed = q.ForModule("model.embed_tokens");
  ASSERT_TRUE(embed.has_value());
  EXPECT_EQ(embed->bits, 4);
  auto other = q.ForModule("model.layers.0.mlp.up_proj");
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->bits, 4);
  EXPECT_EQ(other->group_size, 64);
  // Module paths match exactly, not by prefix.
  EXPECT_EQ(q.ForModule("model.layers.0.mlp.down_proj.weight")->bits, 4);
}

TEST(MlxQuantization, AbsentMeansUnquantized) {
  auto r = ParseMlxQuantization(Config(R"({"model_type": "llama", "quantization": null})"));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(MlxQuantization, QuantizationConfigIsTheFallbackName) {
  auto r = ParseMlxQuantization(Config(R"({"quantization_config": {"group_size": 128, "bits": 3}})"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->defaults.bits, 3);
  EXPECT_EQ((*r)->defaults.group_size, 128);

  // mlx-lm writes both; "quantization" wins.
  r = ParseMlxQuantization(Config(R"({"quantization": {"group_size": 32, "bits": 2},
                                      "quantization_config": {"group_size": 128, "bits": 8}})"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->defaults.bits, 2);
  EXPECT_EQ((*r)->defaults.group_size, 32);
}

TEST(MlxQuantization, UnsupportedSettingsAreRejected) {
  struct Case {
    std::string config, error;
  };
  std::vector<Case> cases = {
      {R"({"quantization": {"group_size": 32, "bits": 4, "mode": "mxfp4"}})",
       "config.json: quantization: quantization mode 'mxfp4' is not supported"},
      {R"({"quantization": {"group_size": 64, "bits": 7}})",
       "config.json: quantization: bits 7 with group_size 64 is not supported (parallm reads bits 2, 3, 4, 5, 6 "
       "or 8 and group_size 32, 64 or 128)"},
      {R"({"quantization": {"group_size": 16, "bits": 4}})",
       "config.json: quantization: bits 4 with group_size 16 is not supported"},
      {R"({"quantization": {"group_size": 64}})", "config.json: quantization: missing \"bits\""},
      {R"({"quantization": {"group_size": 64.5, "bits": 4}})", "\"group_size\" is not an integer (64.5)"},
      {R"({"quantization": {"group_size": 64, "bits": "4"}})", "\"bits\" is not an integer"},
      {R"({"quantization": {"group_size": 64, "bits": 4294967300}})", "bits 4294967300 with group_size 64 is not"},
      {R"({"quantization": 4})", "config.json: \"quantization\" is not a JSON object"},
      {R"({"quantization": {"group_size": 64, "bits": 4, "model.layers.3.mlp.gate_proj": {"bits": 1}}})",
       "config.json: quantization.model.layers.3.mlp.gate_proj: bits 1 with group_size 64 is not supported"},
      {R"({"quantization": {"group_size": 64, "bits": 4, "lm_head": {"mode": "nvfp4"}}})",
       "quantization.lm_head: quantization mode 'nvfp4' is not supported"},
      {R"({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}})",
       "config.json: quantization_config quant_method 'gptq' is not supported"},
  };
  for (const Case& c : cases) {
    auto r = ParseMlxQuantization(Config(c.config));
    ASSERT_FALSE(r.ok()) << c.config;
    EXPECT_TRUE(Contains(r.status().message(), c.error)) << c.config;
  }
}

TEST(MlxQuantization, OpenHfFolderReadsIt) {
  std::string dir = testing::ScratchDir("hf-mlx");
  json::object config = SmallConfig();
  config["quantization"] = json::object{{"group_size", 64}, {"bits", 4}, {"lm_head", false}};
  config["quantization_config"] = config["quantization"];
  ASSERT_TRUE(WriteHfFolder(dir, config, SmallModel()).ok());
  auto folder = OpenHfFolder(dir);
  ASSERT_TRUE(folder.ok()) << folder.status().message();
  ASSERT_TRUE(folder->quantization.has_value());
  EXPECT_EQ(folder->quantization->defaults.bits, 4);
  EXPECT_FALSE(folder->quantization->ForModule("lm_head").has_value());

  config["quantization"] = json::object{{"group_size", 48}, {"bits", 4}};
  ASSERT_TRUE(WriteHfFolder(dir, config, SmallModel()).ok());
  auto bad = OpenHfFolder(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            dir +
                ": config.json: quantization: bits 4 with group_size 48 is not supported (parallm reads bits 2, 3, "
                "4, 5, 6 or 8 and group_size 32, 64 or 128)");
}

}  // namespace
}  // namespace parallm
