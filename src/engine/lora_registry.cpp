// LoraRegistry: named adapters, resident up to max_loras, least recently used evicted.
#include "engine/lora_registry.h"

#include <algorithm>

#include "util/check.h"

namespace parallm {

LoraRegistry::LoraRegistry(const ModelConfig& base, int32_t max_loras) : base_(base), max_loras_(std::max(1, max_loras)) {}

Status LoraRegistry::Add(const std::string& name, const std::string& path) {
  if (name.empty()) return Err("an adapter needs a name");
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Slot& s : slots_)
      if (s.name == name) return Err("the adapter '{}' is already loaded (from {})", name, s.path);
  }
  // Loading reads files: outside the lock, so requests for other adapters go on meanwhile.
  PARALLM_ASSIGN_OR_RETURN(std::shared_ptr<const LoraAdapter> adapter, LoadNamed(name, path));
  std::lock_guard<std::mutex> lock(mu_);
  for (const Slot& s : slots_)
    if (s.name == name) return Err("the adapter '{}' is already loaded (from {})", name, s.path);
  slots_.push_back(Slot{name, path, std::move(adapter)});
  ++loads_;
  Touch(name);
  return Status::Ok();
}

bool LoraRegistry::Remove(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(slots_.begin(), slots_.end(), [&](const Slot& s) { return s.name == name; });
  if (it == slots_.end()) return false;
  slots_.erase(it);
  lru_.remove(name);
  return true;
}

Result<std::shared_ptr<const LoraAdapter>> LoraRegistry::Acquire(const std::string& name) {
  std::string path;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(slots_.begin(), slots_.end(), [&](const Slot& s) { return s.name == name; });
    if (it == slots_.end()) return Err("The model '{}' does not exist.", name);
    if (it->adapter != nullptr) {
      Touch(name);
      return it->adapter;
    }
    path = it->path;
  }
  PARALLM_ASSIGN_OR_RETURN(std::shared_ptr<const LoraAdapter> adapter, LoadNamed(name, path));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(slots_.begin(), slots_.end(), [&](const Slot& s) { return s.name == name; });
  if (it == slots_.end()) return Err("The model '{}' does not exist.", name);  // unloaded meanwhile
  if (it->adapter == nullptr) {
    it->adapter = std::move(adapter);
    ++loads_;
  }
  Touch(name);
  return it->adapter;
}

Result<std::shared_ptr<const LoraAdapter>> LoraRegistry::LoadNamed(const std::string& name,
                                                                  const std::string& path) const {
  PARALLM_ASSIGN_OR_RETURN(std::shared_ptr<const LoraAdapter> adapter, LoadLoraAdapter(path, base_));
  // The loader's is the only reference yet: the name is set before anyone else sees the adapter.
  std::const_pointer_cast<LoraAdapter>(adapter)->name = name;
  return adapter;
}

void LoraRegistry::Touch(const std::string& name) {
  lru_.remove(name);
  lru_.push_front(name);
  while (static_cast<int32_t>(lru_.size()) > max_loras_) {
    const std::string victim = lru_.back();
    lru_.pop_back();
    for (Slot& s : slots_)
      if (s.name == victim) s.adapter.reset();  // requests using it keep their reference
  }
}

bool LoraRegistry::Has(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::any_of(slots_.begin(), slots_.end(), [&](const Slot& s) { return s.name == name; });
}

std::vector<LoraRegistry::Entry> LoraRegistry::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Entry> out;
  for (const Slot& s : slots_) out.push_back(Entry{s.name, s.path, s.adapter != nullptr});
  return out;
}

int32_t LoraRegistry::num_resident() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int32_t>(lru_.size());
}

int64_t LoraRegistry::num_loads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loads_;
}

}  // namespace parallm
