// --kv-cache-dtype: the flag, its choices and its help.
#include "cli/kv_cache_dtype_option.h"

#include <string>

namespace parallm::cli {

void AddKvCacheDtypeOption(CLI::App* cmd, KvDtype* dtype) {
  cmd->add_option_function<std::string>(
         "--kv-cache-dtype",
         [dtype](const std::string& name) {
           const std::optional<KvDtype> parsed = ParseKvDtype(name);
           if (!parsed) {
             std::string message =
                 "--kv-cache-dtype: '" + name + "' is not one of auto, f16 (float16), bf16 (bfloat16) or int8";
             if (name.rfind("fp8", 0) == 0)
               message += "; fp8 is a GPU format, and int8 (with a scale per token and head) takes the same bytes here";
             throw CLI::ValidationError(message);
           }
           *dtype = *parsed;
         },
         "How the KV cache stores keys and values: auto (f32, exact), f16 or bf16 (half the memory per token; f16 "
         "is llama.cpp's default and the closer to f32, bf16 has f32's range) or int8 "
         "(a quarter, with one scale per token and head); more requests fit, and long contexts read fewer bytes")
      ->type_name("TYPE")
      ->default_str("auto");
}

}  // namespace parallm::cli
