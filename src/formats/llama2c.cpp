// llama2.c checkpoint and tokenizer.bin readers: the header is validated against the file size before any
// tensor view is carved, so a truncated or mislabelled file is an error, not an out-of-bounds read.
#include "formats/llama2c.h"

#include <cstring>

#include "util/mapped_file.h"

namespace parallm {
namespace {

// Appends an f32 tensor view of `count` values at `*offset`, advancing the offset.
void Carve(TensorSet& set, const uint8_t* base, size_t* offset, const std::string& name, std::vector<int64_t> shape) {
  TensorView v;
  v.dtype = DType::kF32;
  v.shape = std::move(shape);
  v.data = base + *offset;
  v.nbytes = static_cast<size_t>(v.NumElements()) * 4;
  *offset += v.nbytes;
  set.tensors[name] = std::move(v);
}

}  // namespace

Result<Llama2cCheckpoint> ReadLlama2cCheckpoint(const std::string& path) {
  PARALLM_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  return ParseLlama2cCheckpoint(file->bytes(), path, file);
}

Result<Llama2cCheckpoint> ParseLlama2cCheckpoint(std::span<const uint8_t> bytes, const std::string& path,
                                                 std::shared_ptr<const void> owner) {
  if (bytes.size() < 28) return Err("{}: {} bytes is too short for a llama2.c header (28 bytes)", path, bytes.size());
  int32_t h[7];
  std::memcpy(h, bytes.data(), sizeof(h));
  Llama2cCheckpoint ckpt;
  Llama2cConfig& c = ckpt.config;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.shared_classifier = h[5] > 0;
  c.vocab_size = h[5] > 0 ? h[5] : -h[5];
  c.seq_len = h[6];
  // Bounds far above any real model keep the size arithmetic below from overflowing.
  static constexpr const char* kFields[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
                                             "seq_len"};
  static constexpr int64_t kLimits[7] = {1 << 17, 1 << 19, 1 << 10, 1 << 12, 1 << 12, 1 << 22, 1 << 22};
  for (int i = 0; i < 7; ++i) {
    int64_t v = i == 5 ? c.vocab_size : h[i];
    if (v <= 0 || v > kLimits[i])
      return Err("{}: not a llama2.c checkpoint ({} is {} in the header)", path, kFields[i], h[i]);
  }
  if (c.dim % c.n_heads != 0 || c.n_heads % c.n_kv_heads != 0)
    return Err("{}: inconsistent llama2.c header: dim {} heads {} kv heads {}", path, c.dim, c.n_heads, c.n_kv_heads);
  const int64_t head = c.dim / c.n_heads, kv_dim = head * c.n_kv_heads, L = c.n_layers;
  const int64_t D = c.dim, H = c.hidden_dim, V = c.vocab_size;
  int64_t floats = V * D + L * D + L * D * D + 2 * L * kv_dim * D + L * D * D + L * D + 3 * L * H * D + D +
                   c.seq_len * head;  // + freq_cis real/imag (seq_len x head/2 each)
  if (!c.shared_classifier) floats += V * D;
  int64_t expected = 28 + floats * 4;
  if (static_cast<int64_t>(bytes.size()) != expected)
    return Err("{}: size {} does not match its llama2.c header (dim {}, hidden {}, layers {}, heads {}/{}, vocab {}, "
               "seq_len {}: expected {} bytes)",
               path, bytes.size(), c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len,
               expected);

  TensorSet& t = ckpt.tensors;
  const uint8_t* base = bytes.data();
  size_t off = 28;
  Carve(t, base, &off, "token_embd.weight", {V, D});
  // Per-layer tensors are stored as one array per kind, layer-major: carve one view per layer.
  auto carve_layers = [&](const char* kind, std::vector<int64_t> shape) {
    for (int64_t l = 0; l < L; ++l) Carve(t, base, &off, fmt::format("blk.{}.{}.weight", l, kind), shape);
  };
  carve_layers("attn_norm", {D});
  carve_layers("attn_q", {D, D});
  carve_layers("attn_k", {kv_dim, D});
  carve_layers("attn_v", {kv_dim, D});
  carve_layers("attn_output", {D, D});
  carve_layers("ffn_norm", {D});
  carve_layers("ffn_gate", {H, D});  // w1
  carve_layers("ffn_down", {D, H});  // w2
  carve_layers("ffn_up", {H, D});    // w3
  Carve(t, base, &off, "output_norm.weight", {D});
  off += static_cast<size_t>(c.seq_len * head) * 4;  // freq_cis_real, freq_cis_imag: recomputed, not read
  if (!c.shared_classifier) Carve(t, base, &off, "output.weight", {V, D});
  if (owner) t.owners.push_back(std::move(owner));
  return ckpt;
}

Result<Llama2cTokenizer> ReadLlama2cTokenizer(const std::string& path) {
  PARALLM_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  return ParseLlama2cTokenizer(file->bytes(), path);
}

Result<Llama2cTokenizer> ParseLlama2cTokenizer(std::span<const uint8_t> bytes, const std::string& path) {
  const uint8_t* p = bytes.data();
  size_t n = bytes.size(), off = 0;
  auto read_i32 = [&](int32_t* v) {
    if (n - off < 4) return false;
    std::memcpy(v, p + off, 4);
    off += 4;
    return true;
  };
  Llama2cTokenizer tok;
  if (!read_i32(&tok.max_token_length) || tok.max_token_length <= 0 || tok.max_token_length > 4096)
    return Err("{}: not a llama2.c tokenizer.bin (bad max_token_length)", path);
  while (off < n) {
    float score;
    int32_t len;
    if (n - off < 8) return Err("{}: truncated at token {} (offset {})", path, tok.pieces.size(), off);
    std::memcpy(&score, p + off, 4);
    off += 4;
    read_i32(&len);
    if (len < 0 || len > tok.max_token_length + 16 || static_cast<size_t>(len) > n - off)
      return Err("{}: token {} has length {} (offset {}), beyond the file or max_token_length", path,
                 tok.pieces.size(), len, off);
    tok.pieces.emplace_back(reinterpret_cast<const char*>(p + off), static_cast<size_t>(len));
    tok.scores.push_back(score);
    off += static_cast<size_t>(len);
  }
  if (tok.pieces.empty()) return Err("{}: tokenizer has no tokens", path);
  return tok;
}

}  // namespace parallm
