// --kv-cache-dtype: the flag, its choices and its help.
#include "cli/kv_cache_dtype_option.h"

#include <string>

namespace parallm::cli {

void AddKvCacheDtypeOption(CLI::App* cmd, std::optional<KvDtype>* dtype) {
  cmd->add_option_function<std::string>(
         "--kv-cache-dtype",
         [dtype](const std::string& name) {
           if (!ParseKvCacheDtype(name, dtype)) {
             std::string message = "--kv-cache-dtype: '" + name +
                                   "' is not one of auto, f32 (float32), f16 (float16), bf16 (bfloat16) or int8";
             if (name.rfind("fp8", 0) == 0)
               message += "; fp8 is a GPU format, and int8 (with a scale per token and head) takes the same bytes here";
             throw CLI::ValidationError(message);
           }
         },
         "How the KV cache stores keys and values: auto (the model's: f16 for quantized or 16-bit weights, as "
         "llama.cpp stores, f32 for f32 weights), f32 (exact), f16 or bf16 (half of f32's memory per token; f16 is "
         "the closer to f32, bf16 has f32's range) or int8 (a quarter, with one scale per token and head); a smaller "
         "type fits more requests, and long contexts read fewer bytes")
      ->type_name("TYPE")
      ->default_str("auto");
}

}  // namespace parallm::cli
