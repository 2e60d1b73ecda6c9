// LoraRegistry: the LoRA adapters a server or batch run knows by name (vLLM's --lora-modules NAME=PATH and
// /v1/load_lora_adapter), loaded once and kept resident up to `max_loras`, the least recently used evicted
// beyond that (and loaded again from its path when next asked for). Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/lora.h"
#include "util/status.h"

namespace parallm {

class LoraRegistry {
 public:
  // `max_loras`: adapters kept loaded at once (>= 1).
  LoraRegistry(const ModelConfig& base, int32_t max_loras);

  // Loads the adapter at `path` and registers it as `name` (its most recently used). Fails, registering nothing,
  // when the name is taken or the adapter does not load for the base model.
  Status Add(const std::string& name, const std::string& path);
  // Unregisters `name`. Requests already running with it hold the adapter and finish with it; new requests
  // naming it fail. False when unknown.
  bool Remove(const std::string& name);
  // The adapter registered as `name`, loaded again if it was evicted; nullptr-free. An unknown name is an error
  // whose message says so ("... does not exist").
  Result<std::shared_ptr<const LoraAdapter>> Acquire(const std::string& name);
  bool Has(const std::string& name) const;

  struct Entry {
    std::string name, path;
    bool resident = false;
  };
  std::vector<Entry> List() const;  // in registration order
  int32_t max_loras() const { return max_loras_; }
  int32_t num_resident() const;
  int64_t num_loads() const;  // loads from disk, first ones and reloads after eviction

 private:
  struct Slot {
    std::string name, path;
    std::shared_ptr<const LoraAdapter> adapter;  // null while evicted
  };
  void Touch(const std::string& name);  // most recently used; evicts beyond max_loras_ (mu_ held)
  // LoadLoraAdapter, the adapter named `name` (its LoraAdapter::name).
  Result<std::shared_ptr<const LoraAdapter>> LoadNamed(const std::string& name, const std::string& path) const;

  ModelConfig base_;
  int32_t max_loras_;
  mutable std::mutex mu_;
  std::vector<Slot> slots_;
  std::list<std::string> lru_;  // resident names, most recent first
  int64_t loads_ = 0;
};

}  // namespace parallm
