// The parallm subcommands; each file registers one (or a pair) on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

namespace parallm::cli {

void AddInfoCommand(CLI::App& app);
void AddMakeModelCommand(CLI::App& app);
void AddConvertCommand(CLI::App& app);
void AddGenerateCommands(CLI::App& app);  // generate, logits
void AddBatchCommand(CLI::App& app);
void AddTokenizeCommand(CLI::App& app);
void AddBenchCommand(CLI::App& app);  // bench, bench batching|prefix-cache|paged-cache
void AddServeCommand(CLI::App& app);  // serve: the OpenAI-compatible HTTP server

// Prints "error: <message>" to stderr; returns the exit code for a user error.
int Fail(const std::string& message);

// For subcommand callbacks: a command's non-zero return becomes the process's exit code.
inline void ExitOnError(int rc) {
  if (rc != 0) throw CLI::RuntimeError(rc);
}

}  // namespace parallm::cli
