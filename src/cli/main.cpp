// parallm: the command-line front door. Each subcommand lives in its own cmd_*.cpp.
#include <cstdio>

#include "cli/commands.h"

namespace parallm::cli {

int Fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

}  // namespace parallm::cli

int main(int argc, char** argv) {
  CLI::App app{
      "parallm: LLM inference built for the total throughput of many parallel requests.\n"
      "Loads GGUF files, Hugging Face safetensors folders, MLX-quantized folders and llama2.c checkpoints."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "parallm 0.1.0");
  parallm::cli::AddInfoCommand(app);
  parallm::cli::AddGenerateCommands(app);
  parallm::cli::AddBatchCommand(app);
  parallm::cli::AddServeCommand(app);
  parallm::cli::AddTokenizeCommand(app);
  parallm::cli::AddBenchCommand(app);
  parallm::cli::AddMakeModelCommand(app);
  parallm::cli::AddConvertCommand(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
