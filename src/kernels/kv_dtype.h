// How the paged KV cache stores keys and values: f32; f16 or bf16 (half the bytes; f16 keeps 3 more bits of mantissa,
// bf16 f32's range); or int8 with one f32 scale per slot and KV head (a quarter, plus 4 bytes per head). The attention
// kernel reads all four; the storage writes them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace parallm {

enum class KvDtype : uint8_t { kF32, kBf16, kInt8, kF16 };

// Every type, the exact one first (the order `bench kv-cache-dtype` prints them in).
inline constexpr KvDtype kKvDtypes[] = {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kInt8};

// Bytes of one stored element (int8's scales are extra: KvScaleBytes per slot and KV head).
size_t KvElementBytes(KvDtype dtype);
inline size_t KvScaleBytes(KvDtype dtype) { return dtype == KvDtype::kInt8 ? sizeof(float) : 0; }

// "f32", "f16", "bf16", "int8".
std::string_view KvDtypeName(KvDtype dtype);

// The types' names as vLLM's --kv-cache-dtype spells them: "float32"/"f32", "float16"/"f16"/"half" (llama.cpp's
// default cache type), "bfloat16"/"bf16", "int8". Anything else ("auto" and fp8 among them) is nullopt.
std::optional<KvDtype> ParseKvDtype(std::string_view name);

// A --kv-cache-dtype value into *dtype: "auto" as nullopt (the model's own type, Model::AutoKvDtype), every other
// name as ParseKvDtype. False, *dtype untouched, for a name that is neither.
bool ParseKvCacheDtype(std::string_view name, std::optional<KvDtype>* dtype);

// Stores the n floats of one slot's KV head as `dtype` at dst (n elements of KvElementBytes). f16 and bf16 round to
// nearest even, f16 saturating at its largest finite value (65504) so that a large key cannot turn a score into inf
// (NaN stays NaN); int8 is symmetric, x ~= q * scale with scale = max|x| / 127, written to *scale (left untouched
// for the other types).
void EncodeKvRow(KvDtype dtype, const float* x, int n, void* dst, float* scale);

// Element i of a row EncodeKvRow wrote, as f32 (for int8: q * scale).
float DecodeKvElement(KvDtype dtype, const void* row, int i, float scale);

// The bf16 bits of x, rounded to nearest even (NaN stays NaN), and back.
uint16_t FloatToBf16(float x);
float Bf16ToFloat(uint16_t b);

}  // namespace parallm
